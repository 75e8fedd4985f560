#include "rdmacm/detail/id_machine.hpp"

namespace rdmacm::detail {
namespace {

// The operation an event answers, if it answers one.
bool answers(rdma_cm_event_type type, op_kind& kind) noexcept {
    switch (type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
    case RDMA_CM_EVENT_ADDR_ERROR: kind = op_kind::resolve_address; return true;
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
    case RDMA_CM_EVENT_ROUTE_ERROR: kind = op_kind::resolve_route; return true;
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
    case RDMA_CM_EVENT_ESTABLISHED:
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR: kind = op_kind::establish; return true;
    case RDMA_CM_EVENT_CONNECT_REQUEST: kind = op_kind::request; return true;
    default: return false;
    }
}

// Operations whose CM work goes on in the kernel after we stop waiting for it.
bool has_kernel_event(op_kind k) noexcept { return k != op_kind::next_event && k != op_kind::request; }

} // namespace

const char* to_string(op_kind k) noexcept {
    switch (k) {
    case op_kind::resolve_address: return "resolve_address";
    case op_kind::resolve_route: return "resolve_route";
    case op_kind::establish: return "establish";
    case op_kind::disconnect: return "disconnect";
    case op_kind::request: return "request";
    case op_kind::next_event: return "next_event";
    }
    return "?";
}

error_code event_result(rdma_cm_event_type type) noexcept {
    switch (type) {
    case RDMA_CM_EVENT_ADDR_ERROR: return errc::address_error;
    case RDMA_CM_EVENT_ROUTE_ERROR: return errc::route_error;
    case RDMA_CM_EVENT_CONNECT_ERROR: return errc::connect_error;
    case RDMA_CM_EVENT_UNREACHABLE: return errc::unreachable;
    case RDMA_CM_EVENT_REJECTED: return errc::rejected;
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return errc::device_removed;
    case RDMA_CM_EVENT_MULTICAST_ERROR: return errc::multicast_error;
    default: return {};
    }
}

error_code id_machine::start(op_kind kind, bool has_device) noexcept {
    if (closed_) return errc::not_open;
    if (removed_ && kind != op_kind::next_event) return errc::device_removed;
    if (slot(kind) != state::idle) return errc::operation_in_progress;
    if (kind == op_kind::establish && !has_device) return errc::no_device;
    slot(kind) = state::outstanding;
    ++generation_[index(kind)];
    return {};
}

id_machine::decision id_machine::on_event(rdma_cm_event_type type) noexcept {
    op_kind kind = op_kind::next_event;
    // TIMEWAIT_EXIT normally follows DISCONNECTED; alone, it is the kernel's last word on a
    // connection whose DISCONNECTED never came, and ends it the same way.
    bool lost = type == RDMA_CM_EVENT_DISCONNECTED || (type == RDMA_CM_EVENT_TIMEWAIT_EXIT && !disconnected_);
    if (lost) {
        disconnected_ = true;
        // A disconnect we started completes on it; a peer's goes to next_event.
        if (slot(op_kind::disconnect) != state::idle) kind = op_kind::disconnect;
    } else if (!answers(type, kind) || slot(kind) == state::idle) {
        // Nobody asked for it (a peer's event, or one the user caused through the native
        // handle): next_event reports it. CONNECT_REQUEST always queues for the listener.
        if (kind != op_kind::request) kind = op_kind::next_event;
    }
    // next_event and request deliver whatever came: the event's type tells what it was.
    bool delivers = kind == op_kind::next_event || kind == op_kind::request;
    decision d{action::queue, kind, delivers ? error_code{} : event_result(type), 0, {}, false};
    switch (slot(kind)) {
    case state::outstanding: d.what = action::complete; break;
    case state::abandoned:
        d.what = action::drop;
        slot(kind) = state::idle;
        break;
    case state::idle: d.what = action::queue; break;
    }
    if (type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
        end_others(d, errc::device_removed, [](op_kind) { return true; });
        removed_ = true;
        d.connection_lost = true;
    } else if (lost) {
        end_others(d, errc::disconnected, [](op_kind k) { return k == op_kind::establish; });
        d.connection_lost = true;
    }
    return d;
}

template <typename Which>
void id_machine::end_others(decision& d, errc why, Which which) noexcept {
    for (std::size_t k = 0; k < op_kind_count; ++k) {
        auto other = static_cast<op_kind>(k);
        if (other == d.kind || !which(other)) continue;
        // An abandoned operation's answer will not come either: the slot is free.
        if (slot(other) == state::abandoned) slot(other) = state::idle;
        if (slot(other) != state::outstanding) continue;
        d.others |= static_cast<std::uint8_t>(1U << k);
        d.others_result = why;
    }
}

void id_machine::completed(op_kind kind) noexcept {
    if (slot(kind) == state::outstanding) slot(kind) = state::idle;
}

bool id_machine::cancel(op_kind kind) noexcept {
    if (slot(kind) != state::outstanding) return false;
    slot(kind) = has_kernel_event(kind) && !closed_ ? state::abandoned : state::idle;
    return true;
}

} // namespace rdmacm::detail
