#pragma once
/// @file
/// `rdmacm::cm_event`: an owned copy of an `rdma_cm_event`.
#include <rdma/rdma_cma.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace rdmacm {

/// The CM event types of librdmacm (`RDMA_CM_EVENT_ADDR_RESOLVED`, ...).
using event_type = rdma_cm_event_type;

/// librdmacm's name of an event type ("RDMA_CM_EVENT_ESTABLISHED").
const char* to_string(event_type t) noexcept;

/// A CM event, copied out of librdmacm's buffer and acknowledged at once: it owns its
/// private data and stays valid for as long as you keep it (librdmacm's own event and its
/// private data are gone after `rdma_ack_cm_event`). Cheap to move, no heap allocation.
class cm_event {
public:
    /// An empty event: what an operation that failed before any event came completes with.
    cm_event() = default;
    /// Copies `ev` (does not ack it).
    explicit cm_event(const rdma_cm_event& ev) noexcept;

    /// True for a default-constructed event (no event came).
    bool empty() const noexcept { return head_.empty; }
    event_type type() const noexcept { return head_.type; }
    /// The event's raw status: 0, a negative errno, or (REJECTED on IB) the reject reason.
    int status() const noexcept { return head_.status; }

    /// The peer's private data (connect, accept, reject and disconnect events). IB pads it
    /// to the CM message's fixed size, so it may be longer than what the peer sent.
    std::span<const std::byte> private_data() const noexcept { return {private_data_.data(), head_.private_data_len}; }

    /// Connection parameters (RC/connected events), with `private_data` pointing into this
    /// object; `qp_num` is the peer's QP number.
    const rdma_conn_param& conn_param() const noexcept { return head_.conn; }
    /// UD parameters (UD and multicast events), `private_data` likewise pointing here.
    const rdma_ud_param& ud_param() const noexcept { return head_.ud; }

    cm_event(const cm_event& other) noexcept { *this = other; }
    cm_event& operator=(const cm_event& other) noexcept;

private:
    // All but the private data, copied as one block: an event is copied a few times on
    // its way to a handler, and most carry little or no private data.
    struct head {
        bool empty = true;
        bool ud_event = false;
        std::uint8_t private_data_len = 0; // the first bytes of private_data_ that are the data
        event_type type = RDMA_CM_EVENT_ADDR_RESOLVED;
        int status = 0;
        rdma_conn_param conn{}; // (its private_data points into private_data_, or is null)
        rdma_ud_param ud{};     // (likewise)
    };
    head head_;
    std::array<std::byte, 256> private_data_;
    void point_private_data() noexcept;
};

} // namespace rdmacm
