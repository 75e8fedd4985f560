#pragma once
// The librdmacm call that starts an operation, as a plain value: kept in deferred
// operations without a heap allocation, made by the compiled core (src/cm/op_call.cpp).
#include "rdmacm/conn_params.hpp"
#include "rdmacm/endpoint.hpp"

#include <rdma/rdma_cma.h>

#include <chrono>
#include <cstdint>
#include <optional>

namespace rdmacm::detail {

class id_impl;

struct op_call {
    enum class call : std::uint8_t { none, resolve_address, resolve_route, connect, accept, disconnect };
    call what = call::none;
    endpoint local{};
    endpoint remote{};
    int timeout_ms = 0;
    std::optional<owned_conn_params> params{};

    static op_call resolve_address(const endpoint& local, const endpoint& remote, std::chrono::milliseconds t) {
        return {call::resolve_address, local, remote, static_cast<int>(t.count()), {}};
    }
    static op_call resolve_route(std::chrono::milliseconds t) {
        return {call::resolve_route, {}, {}, static_cast<int>(t.count()), {}};
    }
    static op_call connect(const conn_params& p) { return {call::connect, {}, {}, 0, owned_conn_params(p)}; }
    static op_call accept(const conn_params& p) { return {call::accept, {}, {}, 0, owned_conn_params(p)}; }
    static op_call disconnect() { return {call::disconnect, {}, {}, 0, {}}; }

    // Makes the call on `id`; its error, with the call named (see call_error.hpp).
    error_code operator()(id_impl& impl, rdma_cm_id* id) const;
};

} // namespace rdmacm::detail
