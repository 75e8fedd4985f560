#pragma once
/// @file
/// `rdmacm::conn_params`: what connect and accept send to the peer.
#include "rdmacm/error.hpp"

#include <rdma/rdma_cma.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace rdmacm {

/// Parameters of `rdma_connect` / `rdma_accept`. The defaults suit an RC queue pair with
/// one outstanding RDMA read each way. `private_data` is copied when the operation is
/// initiated, so it need not outlive the call.
struct conn_params {
    std::span<const std::byte> private_data{};
    std::uint8_t responder_resources = 1;
    std::uint8_t initiator_depth = 1;
    std::uint8_t flow_control = 1;
    /// Connect only (the passive side's queue pair takes the active side's). How many
    /// times a send the peer does not acknowledge is sent again before it fails
    /// (`IBV_WC_RETRY_EXC_ERR`): what bounds the time a writer takes to learn its peer's
    /// host is gone (docs/reliability.md). 6, not the 3-bit field's 7: rxe retries 7
    /// forever (Linux 6.1 rxe_comp.c), so a crashed peer would never be noticed there.
    std::uint8_t retry_count = 6;
    std::uint8_t rnr_retry_count = 7; ///< 7 = retry forever
    /// This side's ACK time-out, as the verbs' exponent: a send not acknowledged within
    /// 4.096 µs × 2^`ack_timeout` is sent again (`retry_count` times, the connecting side's),
    /// so with `retry_count` it bounds how long a writer takes to learn its peer's host is
    /// gone. 0 (the default): the CM's own, from the path (about 2 s a try over RoCE:
    /// docs/reliability.md); 1–31: set with `rdma_set_option(RDMA_OPTION_ID_ACK_TIMEOUT)`
    /// before the connect or accept (above 31: EINVAL, "conn_params::ack_timeout").
    /// InfiniBand and RoCE: an iWARP connection is TCP's, whose retransmissions
    /// (`net.ipv4.tcp_retries2`) bound it instead.
    std::uint8_t ack_timeout = 0;
};

namespace detail {

// conn_params with its private data copied in: safe to keep in a deferred operation.
class owned_conn_params {
public:
    explicit owned_conn_params(const conn_params& p) noexcept;
    // private_data_too_long when the bytes do not fit librdmacm's 8-bit length (the
    // transport's own, smaller, limit is the kernel's to enforce: EINVAL); EINVAL
    // ("conn_params::ack_timeout") for a time-out the verbs' 5 bits cannot hold.
    error_code error() const noexcept { return error_; }
    rdma_conn_param native() const noexcept;
    // The parameters, private data pointing into this object.
    conn_params view() const noexcept {
        conn_params p = params_;
        p.private_data = {data_.data(), params_.private_data.size()};
        return p;
    }

    // The verbs' largest ACK time-out exponent (5 bits).
    static constexpr std::uint8_t max_ack_timeout = 31;

private:
    conn_params params_;
    std::array<std::byte, 255> data_{};
    error_code error_;
};

} // namespace detail
} // namespace rdmacm
