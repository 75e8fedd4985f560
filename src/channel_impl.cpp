#include "rdmacm/detail/channel_impl.hpp"

#include "rdmacm/detail/call_error.hpp"
#include "rdmacm/detail/id_impl.hpp"

#include <boost/system/system_error.hpp>

#include <fcntl.h>

namespace rdmacm::detail {

std::shared_ptr<channel_impl> channel_impl::create(const executor_type& ex) {
    rdma_event_channel* ch = rdma_create_event_channel();
    if (!ch) throw boost::system::system_error(RDMACM_CALL_ERROR("rdma_create_event_channel"));
    // Ourselves, not Asio: async_wait stops setting O_NONBLOCK in Boost 1.86 (semantics A4).
    int flags = ::fcntl(ch->fd, F_GETFL);
    if (flags < 0 || ::fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        auto ec = RDMACM_CALL_ERROR("fcntl(O_NONBLOCK)");
        rdma_destroy_event_channel(ch);
        throw boost::system::system_error(ec);
    }
    std::shared_ptr<channel_impl> self(new channel_impl(ex, ch));
    boost::asio::dispatch(self->strand_, [self] { self->wait(); });
    return self;
}

channel_impl::channel_impl(const executor_type& ex, rdma_event_channel* ch)
    : channel_(ch), executor_(ex), strand_(ex), descriptor_(executor_type(strand_), ch->fd) {}

channel_impl::~channel_impl() {
    // librdmacm owns the fd: Asio lets go of it, rdma_destroy_event_channel closes it.
    if (descriptor_.is_open()) descriptor_.release();
    rdma_destroy_event_channel(channel_);
}

void channel_impl::remove_owner() noexcept {
    if (owners_.fetch_sub(1, std::memory_order_acq_rel) == 1)
        post_to_reader([self = shared_from_this()] { self->stop(); });
}

void channel_impl::wait() {
    if (stopped_) return;
    descriptor_.async_wait(boost::asio::posix::descriptor_base::wait_read,
                           [self = shared_from_this()](error_code ec) {
                               if (ec) return; // released: the channel is going away
                               self->drain();
                               self->wait();
                           });
}

// Edge-triggered readiness: read until EAGAIN, or events stay queued unseen (semantics A3).
void channel_impl::drain() {
    rdma_cm_event* ev = nullptr;
    while (!stopped_ && rdma_get_cm_event(channel_, &ev) == 0) {
        events_read_.fetch_add(1, std::memory_order_relaxed);
        // Copy, take the routing pointers, then ack at once: migrate and destroy never
        // wait for an event we hold (semantics R1).
        cm_event copy(*ev);
        if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            auto* listener = static_cast<id_impl*>(ev->listen_id->context);
            rdma_cm_id* new_id = ev->id;
            rdma_ack_cm_event(ev);
            listener->on_request(new_id, copy);
        } else {
            auto* target = static_cast<id_impl*>(ev->id->context);
            rdma_ack_cm_event(ev);
            target->on_event(copy);
        }
    }
    // EAGAIN: drained. Anything else (ENOMEM) leaves the events queued: the next wait
    // fires again at once since the fd is still readable.
}

void channel_impl::stop() {
    stopped_ = true;
    if (descriptor_.is_open()) descriptor_.release(); // aborts the wait; never closes the fd
}

} // namespace rdmacm::detail
