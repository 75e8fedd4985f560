// Synchronous mode (semantics F4/F5): after rdma_migrate_id(id, NULL) librdmacm makes each
// CM call block until the next event of the id's private channel, whatever that event is.
// So a call is refused while an event is queued (it would be taken for the call's own),
// the event is copied and acked at once (as the reader does: destroy and migrate never
// wait), and one that does not answer the call is kept for next_event, in order.
#include "rdmacm/detail/call_error.hpp"
#include "rdmacm/detail/id_impl.hpp"

#include <boost/asio/error.hpp>

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

namespace rdmacm::detail {
namespace {

// Waits for the private channel to be readable; timed_out, or poll's error.
error_code wait_readable(const rdma_cm_id* id, std::chrono::milliseconds timeout) {
    pollfd p{id->channel->fd, POLLIN, 0};
    int ms = timeout.count() < 0
                 ? -1
                 : static_cast<int>(std::min<std::chrono::milliseconds::rep>(timeout.count(), INT32_MAX));
    int n;
    while ((n = ::poll(&p, 1, ms)) < 0 && errno == EINTR) {}
    if (n < 0) return RDMACM_CALL_ERROR("poll");
    if (n == 0) return boost::asio::error::timed_out;
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
    if (machine_.closed()) return errc::not_open;
    if (!synchronous_) return errc::not_synchronous;
    if (in_sync_call_ || migration_) return errc::operation_in_progress;
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
    if ((ec = machine_.start(kind))) return {};
    in_sync_call_ = true;
    rdma_cm_id* id = id_;
    lock.unlock();
    ec = call(*this, id);
    cm_event ev = take_event(id);
    lock.lock();
    in_sync_call_ = false;
    call_done_.notify_all();
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
    in_sync_call_ = true;
    rdma_cm_id* id = id_;
    lock.unlock();
    cm_event ev;
    ec = wait_readable(id, timeout);
    rdma_cm_event* raw = nullptr;
    if (!ec && rdma_get_cm_event(id->channel, &raw) != 0) ec = RDMACM_CALL_ERROR("rdma_get_cm_event");
    if (!ec) {
        ev = cm_event(*raw);
        rdma_ack_cm_event(raw);
    }
    lock.lock();
    in_sync_call_ = false;
    call_done_.notify_all();
    if (!ev.empty()) (void)machine_.on_event(ev.type()); // notes a DISCONNECTED; nothing waits
    return ev;
}

} // namespace rdmacm::detail
