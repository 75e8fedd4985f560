#pragma once
// The per-id bookkeeping of asio-rdmacm as plain code, no I/O and no handlers: which
// operations are outstanding, which one a CM event completes (and with what result), what
// happens to events nobody waits for, and what a cancelled operation leaves behind. The
// I/O side (detail::id_impl) holds the handlers and does what this decides; the tests
// drive this directly with event sequences.
#include "rdmacm/error.hpp"

#include <rdma/rdma_cma.h>

#include <array>
#include <cstdint>

namespace rdmacm::detail {

// One slot per kind: at most one operation of each kind is outstanding on an id.
enum class op_kind : std::uint8_t {
    resolve_address, // ADDR_RESOLVED / ADDR_ERROR
    resolve_route,   // ROUTE_RESOLVED / ROUTE_ERROR
    establish,       // connect or accept: ESTABLISHED / REJECTED / UNREACHABLE / CONNECT_ERROR
    disconnect,      // DISCONNECTED
    request,         // a listener's CONNECT_REQUEST
    next_event,      // any event no other operation consumes
};
inline constexpr std::size_t op_kind_count = 6;

const char* to_string(op_kind k) noexcept;

// What an event means to the operation it completes: success, or the errc it fails with.
error_code event_result(rdma_cm_event_type type) noexcept;

class id_machine {
public:
    enum class action : std::uint8_t {
        complete, // complete the outstanding operation of `kind` with `result` and the event
        queue,    // keep the event for a later operation of `kind` (next_event or request)
        drop,     // the event answers an operation that was cancelled: nobody wants it
    };
    struct decision {
        action what;
        op_kind kind;
        error_code result;
        // Other outstanding operations the event ends, each failing with `others_result`:
        // DEVICE_REMOVAL ends every one; a connection gone ends a connect or accept still
        // waiting for its answer (which will never come).
        std::uint8_t others = 0; // one bit per op_kind
        error_code others_result;
        // The connection is gone (DISCONNECTED, DEVICE_REMOVAL, or a TIMEWAIT_EXIT with no
        // DISCONNECTED before it): so is its data path.
        bool connection_lost = false;

        bool ends(op_kind k) const noexcept { return (others >> static_cast<unsigned>(k)) & 1U; }
    };

    // May an operation of `kind` start? Marks it outstanding if so. Refused when the id is
    // closed (not_open), when its device was removed (device_removed; next_event excepted),
    // when one of that kind is outstanding, or when a cancelled one still has its CM event
    // to come (both operation_in_progress), and a connect or accept (establish) on an id
    // bound to no device yet (`has_device`: the caller reads it off the id; no_device —
    // librdmacm's rdma_connect reads the device's limits and crashes without one).
    error_code start(op_kind kind, bool has_device = true) noexcept;
    bool outstanding(op_kind kind) const noexcept { return slot(kind) == state::outstanding; }
    // An operation of `kind` is outstanding, or a cancelled one still has its event to come.
    bool pending(op_kind kind) const noexcept { return slot(kind) != state::idle; }
    // pending() for any kind.
    bool busy() const noexcept {
        for (std::size_t k = 0; k < op_kind_count; ++k)
            if (pending(static_cast<op_kind>(k))) return true;
        return false;
    }
    std::uint32_t generation(op_kind kind) const noexcept { return generation_[index(kind)]; }

    // An event arrived for this id.
    decision on_event(rdma_cm_event_type type) noexcept;
    // The operation of `kind` completed (its handler was taken).
    void completed(op_kind kind) noexcept;
    // The librdmacm call that started the operation of `kind` failed: no event will come,
    // so the slot is free again even if the operation was cancelled meanwhile.
    void call_failed(op_kind kind) noexcept { slot(kind) = state::idle; }
    // The operation of `kind` is being cancelled; false if none is outstanding. One with a
    // CM operation still running in the kernel leaves its event to be dropped.
    bool cancel(op_kind kind) noexcept;
    // The id is closing: nothing may start any more; every outstanding operation is
    // aborted by the caller (call completed() for each).
    void close() noexcept { closed_ = true; }
    bool closed() const noexcept { return closed_; }
    // A DISCONNECTED has arrived: a later disconnect completes without waiting for one.
    bool disconnected() const noexcept { return disconnected_; }

private:
    enum class state : std::uint8_t { idle, outstanding, abandoned };
    // Marks in `d` the outstanding operations other than d.kind that `which` selects.
    template <typename Which>
    void end_others(decision& d, errc why, Which which) noexcept;
    static std::size_t index(op_kind k) noexcept { return static_cast<std::size_t>(k); }
    state& slot(op_kind k) noexcept { return slots_[index(k)]; }
    state slot(op_kind k) const noexcept { return slots_[index(k)]; }

    std::array<state, op_kind_count> slots_{};
    std::array<std::uint32_t, op_kind_count> generation_{};
    bool closed_ = false;
    bool disconnected_ = false;
    bool removed_ = false; // DEVICE_REMOVAL came: only next_event may start
};

} // namespace rdmacm::detail
