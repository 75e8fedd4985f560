// Synchronous mode (semantics F4, F5): after rdma_migrate_id(id, NULL) librdmacm makes each
// CM call block until the next event of the id's private channel, whatever that event is.
// So a call is refused while an event is queued (it would be taken for the call's own),
// the event is copied and acked at once (as the reader does: destroy and migrate never
// wait), and one that does not answer the call is kept for next_event, in order.
#include "rdmacm/detail/call_error.hpp"
#include "cm/id_impl.hpp"

#include <boost/asio/error.hpp>

#include <poll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>

namespace rdmacm::detail {
namespace {

// Waits for the private channel to be readable; timed_out, operation_aborted when
// `wake_fd` (close()'s eventfd, if any) is, or poll's error.
error_code wait_readable(const rdma_cm_id* id, std::chrono::milliseconds timeout, int wake_fd = -1) {
    std::array<pollfd, 2> p{{{id->channel->fd, POLLIN, 0}, {wake_fd, POLLIN, 0}}};
    int ms = timeout.count() < 0
                 ? -1
                 : static_cast<int>(std::min<std::chrono::milliseconds::rep>(timeout.count(), INT32_MAX));
    int n;
    while ((n = ::poll(p.data(), wake_fd < 0 ? 1 : 2, ms)) < 0 && errno == EINTR) {}
    if (n < 0) return RDMACM_CALL_ERROR("poll");
    if (n == 0) return boost::asio::error::timed_out;
    if (p[1].revents != 0) return boost::asio::error::operation_aborted;
    return {};
}

// The event librdmacm left in id->event, copied and acked.
cm_event take_event(rdma_cm_id* id) {
    if (!id->event) return {};
    cm_event copy(*id->event);
    rdma_ack_cm_event(std::exchange(id->event, nullptr));
    return copy;
}

} // namespace

error_code id_impl::sync_refusal(bool call) const {
    if (auto ec = life_.sync_refusal()) return ec;
    if (call && (!events_.empty() || !wait_readable(id_, std::chrono::milliseconds(0)))) return errc::event_pending;
    return {};
}

cm_event id_impl::call_sync(op_kind kind, const op_call& call, error_code& ec) {
    std::unique_lock lock(mutex_);
    if ((ec = sync_refusal(true))) return {};
    // After the peer's DISCONNECTED nothing answers our rdma_disconnect (IB sends only a
    // DREP), and librdmacm would wait for an event forever: the connection is down
    // already, the id's destruction answers the peer.
    if (kind == op_kind::disconnect && machine_.disconnected()) return {};
    if ((ec = start_in_machine(kind))) return {};
    // librdmacm's own wait inside the call cannot be interrupted: a close() meanwhile
    // destroys the id when the call returns (the call is counted).
    life_.enter_admitted_call(true);
    rdma_cm_id* id = id_;
    lock.unlock();
    ec = call(*this, id);
    cm_event ev = take_event(id);
    lock.lock();
    if (life_.closed()) { // closed meanwhile: the answer is moot, the id goes now
        after_call(lock, true);
        ec = boost::asio::error::operation_aborted;
        return {};
    }
    // (Not closed: nothing is due — no move begins beside a blocking call.)
    (void)life_.leave_call(true);
    if (ev.empty()) { // the call failed before an event came
        machine_.call_failed(kind);
        return {};
    }
    auto d = machine_.on_event(ev.type());
    if (d.what == id_machine::action::complete && d.kind == kind) {
        machine_.completed(kind);
        ec = d.result; // as the asynchronous operation reports it, not librdmacm's errno
        return ev;
    }
    // An event that came meanwhile, not the call's answer (that one is still to come).
    machine_.call_failed(kind);
    events_.push_back(ev);
    ec = errc::unexpected_event;
    return {};
}

cm_event id_impl::next_event_sync(std::chrono::milliseconds timeout, error_code& ec) {
    std::unique_lock lock(mutex_);
    if ((ec = sync_refusal(false))) return {};
    if (!events_.empty()) {
        cm_event ev = events_.front();
        events_.pop_front();
        return ev;
    }
    if (wake_fd_ < 0 && (wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        ec = RDMACM_CALL_ERROR("eventfd");
        return {};
    }
    life_.enter_admitted_call(true); // close() wakes it (wake_fd_), and the id goes when it returns
    rdma_cm_id* id = id_;
    const int wake_fd = wake_fd_;
    lock.unlock();
    cm_event ev;
    ec = wait_readable(id, timeout, wake_fd);
    rdma_cm_event* raw = nullptr;
    if (!ec && rdma_get_cm_event(id->channel, &raw) != 0) ec = RDMACM_CALL_ERROR("rdma_get_cm_event");
    if (!ec) {
        ev = cm_event(*raw);
        rdma_ack_cm_event(raw);
    }
    lock.lock();
    if (life_.closed()) {
        after_call(lock, true);
        ec = boost::asio::error::operation_aborted;
        return {};
    }
    (void)life_.leave_call(true);                        // (as in call_sync)
    if (!ev.empty()) (void)machine_.on_event(ev.type()); // notes a DISCONNECTED; nothing waits
    return ev;
}

} // namespace rdmacm::detail
