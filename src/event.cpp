#include "rdmacm/event.hpp"

#include <algorithm>
#include <cstring>

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

cm_event::cm_event(const rdma_cm_event& ev) noexcept
    : empty_(false), type_(ev.event), status_(ev.status), ud_event_(is_ud_event(ev)) {
    const void* data = nullptr;
    std::size_t len = 0;
    if (ud_event_) {
        ud_ = ev.param.ud;
        data = ud_.private_data;
        len = ud_.private_data_len;
    } else {
        conn_ = ev.param.conn;
        data = conn_.private_data;
        len = conn_.private_data_len;
    }
    private_data_len_ = static_cast<std::uint8_t>(std::min(len, private_data_.size()));
    if (data && private_data_len_) std::memcpy(private_data_.data(), data, private_data_len_);
    point_private_data();
}

cm_event& cm_event::operator=(const cm_event& other) noexcept {
    if (this != &other) {
        empty_ = other.empty_;
        type_ = other.type_;
        status_ = other.status_;
        ud_event_ = other.ud_event_;
        // Only what the event holds: most events, and every completion that carries no
        // event, have no private data (the array alone is 256 bytes, and completions are
        // moved — copied — a few times each on their way to the handler).
        conn_ = ud_event_ ? rdma_conn_param{} : other.conn_;
        ud_ = ud_event_ ? other.ud_ : rdma_ud_param{};
        private_data_len_ = other.private_data_len_;
        std::memcpy(private_data_.data(), other.private_data_.data(), private_data_len_);
        point_private_data();
    }
    return *this;
}

// The parameter structs point at our own copy, never at librdmacm's freed buffer.
void cm_event::point_private_data() noexcept {
    const void* p = private_data_len_ ? private_data_.data() : nullptr;
    conn_.private_data = ud_event_ ? nullptr : p;
    conn_.private_data_len = ud_event_ ? 0 : private_data_len_;
    ud_.private_data = ud_event_ ? p : nullptr;
    ud_.private_data_len = ud_event_ ? private_data_len_ : 0;
}

} // namespace rdmacm
