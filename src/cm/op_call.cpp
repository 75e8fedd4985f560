#include "rdmacm/detail/op_call.hpp"

#include "rdmacm/detail/call_error.hpp"
#include "cm/id_impl.hpp"

namespace rdmacm::detail {

namespace {
// The ACK time-out asked for, set on the id before its connect or accept turns the queue
// pair on (the kernel reads it then: cma.c, rdma_init_qp_attr).
error_code set_ack_timeout(rdma_cm_id* id, const owned_conn_params& params) {
    std::uint8_t exponent = params.view().ack_timeout;
    if (exponent == 0) return {}; // (the CM's own: 0 would turn the timer off)
    if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &exponent, sizeof exponent) != 0)
        return RDMACM_CALL_ERROR("rdma_set_option(RDMA_OPTION_ID_ACK_TIMEOUT)");
    return {};
}
} // namespace

error_code op_call::operator()(id_impl& impl, rdma_cm_id* id) const {
    switch (what) {
    case call::none: return {};
    case call::resolve_address: {
        bool has_local = local != endpoint{};
        if (!supported(remote) || (has_local && !supported(local))) return errc::address_family_not_supported;
        endpoint src = local, dst = remote; // librdmacm takes non-const sockaddrs
        if (rdma_resolve_addr(id, has_local ? src.data() : nullptr, dst.data(), timeout_ms) != 0)
            return RDMACM_CALL_ERROR("rdma_resolve_addr");
        return {};
    }
    case call::resolve_route:
        if (rdma_resolve_route(id, timeout_ms) != 0) return RDMACM_CALL_ERROR("rdma_resolve_route");
        return {};
    case call::connect: {
        if (params->error()) return params->error();
        if (const error_code ec = set_ack_timeout(id, *params)) return ec;
        rdma_conn_param p = params->native();
        if (rdma_connect(id, &p) != 0) return RDMACM_CALL_ERROR("rdma_connect");
        return {};
    }
    case call::accept: {
        if (params->error()) return params->error();
        if (const error_code ec = set_ack_timeout(id, *params)) return ec;
        rdma_conn_param p = params->native();
        if (rdma_accept(id, &p) != 0) return RDMACM_CALL_ERROR("rdma_accept");
        impl.set_pending_request(false);
        return {};
    }
    case call::disconnect:
        if (rdma_disconnect(id) != 0) return RDMACM_CALL_ERROR("rdma_disconnect");
        return {};
    }
    return {};
}

} // namespace rdmacm::detail
