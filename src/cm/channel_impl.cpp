#include "cm/channel_impl.hpp"

#include "rdmacm/detail/call_error.hpp"
#include "cm/id_impl.hpp"

#include <boost/system/system_error.hpp>

#include <poll.h>

#include <atomic>
#include <cerrno>
#include <utility>

namespace rdmacm::detail {

std::shared_ptr<channel_impl> channel_impl::create(const executor_type& ex, liveness keeps) {
    rdma_event_channel* ch = rdma_create_event_channel();
    if (!ch) throw boost::system::system_error(RDMACM_CALL_ERROR("rdma_create_event_channel"));
    std::shared_ptr<channel_impl> self;
    try {
        self.reset(new channel_impl(ex, ch, keeps));
    } catch (...) {
        rdma_destroy_event_channel(ch);
        throw;
    }
    self->start();
    return self;
}

channel_impl::channel_impl(const executor_type& ex, rdma_event_channel* ch, liveness keeps)
    : fd_reader(ex, ch->fd, keeps), channel_(ch) {}

channel_impl::~channel_impl() {
    detach();
    rdma_destroy_event_channel(channel_); // librdmacm owns the fd and closes it
}

bool channel_impl::try_add_owner() noexcept {
    auto n = owners_.load(std::memory_order_relaxed);
    while (n != 0)
        if (owners_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) return true;
    return false;
}

void channel_impl::remove_owner() noexcept {
    if (owners_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    // The last owner may go on the destroyer thread: post only into a living context (a
    // dead one has already let go of the descriptor).
    stop_later();
}

// Edge-triggered readiness: read until EAGAIN, or events stay queued unseen (semantics A3).
bool channel_impl::drain() {
    if (stopped()) return true;
    routing_claim route(*this);
    return drain_claimed();
}

thread_local const channel_impl* channel_impl::draining_ = nullptr;

bool channel_impl::drain_claimed() {
    struct in_drain { // (restored on the way out: a handler run inline may throw)
        const channel_impl* outer = std::exchange(draining_, nullptr);
        ~in_drain() { draining_ = outer; }
    } scope;
    draining_ = this;
    kick_pending_.store(false, std::memory_order_release); // what was moved before is read now
    const auto begun = reads_.begun();                     // moves whose calls are made: their events are queued here
    rdma_cm_event* ev = nullptr;
    while (!stopped()) {
        int got;
        {
            std::lock_guard read(read_mutex_);
            got = rdma_get_cm_event(channel_, &ev);
        }
        if (got != 0) {
            if (errno != EAGAIN) return false; // (ENOMEM) the events stay queued: read again after a pause
            reads_.drained(begun);
            break;
        }
        events_read_.fetch_add(1, std::memory_order_relaxed);
        // Copy, take the routing pointers, then ack at once: migrate and destroy never
        // wait for an event we hold (semantics R1).
        cm_event copy(*ev);
        if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            auto* listener =
                static_cast<id_impl*>(std::atomic_ref<void*>(ev->listen_id->context).load(std::memory_order_acquire));
            rdma_cm_id* new_id = ev->id;
            rdma_ack_cm_event(ev);
            listener->on_request(std::static_pointer_cast<channel_impl>(shared_from_this()), new_id, copy);
        } else {
            auto* target =
                static_cast<id_impl*>(std::atomic_ref<void*>(ev->id->context).load(std::memory_order_acquire));
            rdma_ack_cm_event(ev);
            if (target) target->on_event(copy); // else a rejected request's (reject_request)
        }
    }
    return true;
}

bool channel_impl::try_look_for_move(std::uint64_t ticket) noexcept {
    if (draining_ == this) return false; // inside drain_claimed() on this thread: it reads
    auto route = try_take_route();
    return route && look(ticket);
}

bool channel_impl::look(std::uint64_t ticket) noexcept {
    if (reads_.covered(ticket)) return true;
    // Most moves bring no event along: a poll says so without librdmacm's read (which
    // allocates its event before asking), and counts as a drain to EAGAIN.
    const auto begun = reads_.begun();
    if (has_queued_event(channel_)) return false;
    reads_.drained(begun);
    return true;
}

bool channel_impl::read_for_move_claimed(std::uint64_t ticket) {
    if (!look(ticket)) drain_claimed();
    return reads_.covered(ticket) || stopped();
}

bool channel_impl::has_queued_event(const rdma_event_channel* channel) noexcept {
    pollfd p{channel->fd, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
}

} // namespace rdmacm::detail
