#include "rdmacm/event.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace rdmacm {

const char* to_string(event_type t) noexcept { return rdma_event_str(t); }

namespace {
// Which events carry UD parameters rather than connection parameters (rdma_cma.h).
bool is_ud_event(const rdma_cm_event& ev) noexcept {
    if (ev.event == RDMA_CM_EVENT_MULTICAST_JOIN || ev.event == RDMA_CM_EVENT_MULTICAST_ERROR) return true;
    return ev.id && (ev.id->ps == RDMA_PS_UDP || ev.id->ps == RDMA_PS_IPOIB) &&
           (ev.event == RDMA_CM_EVENT_CONNECT_REQUEST || ev.event == RDMA_CM_EVENT_ESTABLISHED);
}
} // namespace

cm_event::cm_event(const rdma_cm_event& ev) noexcept {
    head_.empty = false;
    head_.type = ev.event;
    head_.status = ev.status;
    head_.ud_event = is_ud_event(ev);
    const void* data = nullptr;
    std::size_t len = 0;
    if (head_.ud_event) {
        head_.ud = ev.param.ud;
        data = head_.ud.private_data;
        len = head_.ud.private_data_len;
    } else {
        head_.conn = ev.param.conn;
        data = head_.conn.private_data;
        len = head_.conn.private_data_len;
    }
    head_.private_data_len = static_cast<std::uint8_t>(std::min(len, private_data_.size()));
    if (data && head_.private_data_len) std::memcpy(private_data_.data(), data, head_.private_data_len);
    point_private_data();
}

// (The parameter struct an event does not use stays as the constructor left it, {}: the
// head's copy carries it along.)
cm_event& cm_event::operator=(const cm_event& other) noexcept {
    static_assert(std::is_trivially_copyable_v<head>, "a cm_event's head is copied as one block");
    if (this != &other) {
        head_ = other.head_;
        // Only what the event holds (the array alone is 256 bytes).
        if (head_.private_data_len)
            std::memcpy(private_data_.data(), other.private_data_.data(), head_.private_data_len);
        point_private_data();
    }
    return *this;
}

// The parameter structs point at our own copy, never at librdmacm's freed buffer (nor at
// the event this one was copied from).
void cm_event::point_private_data() noexcept {
    const void* p = head_.private_data_len ? private_data_.data() : nullptr;
    if (head_.ud_event)
        head_.ud.private_data = p;
    else
        head_.conn.private_data = p;
}

} // namespace rdmacm
