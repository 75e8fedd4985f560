#pragma once
/// @file
/// `rdmacm::rc_qp_init_attr`: queue-pair attributes for a connection, for
/// `cm_id::create_qp` and `connect_options::qp`.
#include <infiniband/verbs.h>

#include <cstdint>

namespace rdmacm {

/// A reliable-connected queue pair with `max_wr` send and receive work requests of
/// `max_sge` scatter/gather entries each. Leave `send_cq`/`recv_cq` null to have librdmacm
/// make the completion queues (and a completion channel, an fd, per queue pair), or set a
/// shared CQ to connect many ids without an fd each.
inline ibv_qp_init_attr rc_qp_init_attr(std::uint32_t max_wr = 1, std::uint32_t max_sge = 1) noexcept {
    ibv_qp_init_attr attr{};
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = attr.cap.max_recv_wr = max_wr;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = max_sge;
    return attr;
}

} // namespace rdmacm
