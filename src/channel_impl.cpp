#include "rdmacm/detail/channel_impl.hpp"

#include "rdmacm/detail/call_error.hpp"
#include "rdmacm/detail/id_impl.hpp"

#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/query.hpp>
#include <boost/system/system_error.hpp>

#include <fcntl.h>

#include <vector>

namespace rdmacm::detail {
namespace {

// Lives in each execution context that has channels: tells them when it shuts down.
class context_service : public boost::asio::execution_context::service {
public:
    static inline boost::asio::execution_context::id id;
    using key_type = context_service;

    explicit context_service(boost::asio::execution_context& ctx)
        : service(ctx), state_(std::make_shared<channel_impl::context_state>()) {}

    std::shared_ptr<channel_impl::context_state> state() const { return state_; }

private:
    void shutdown() override {
        std::lock_guard lock(state_->mutex);
        state_->alive = false;
        for (auto* ch : state_->channels) ch->context_shutdown();
        state_->channels.clear();
    }

    std::shared_ptr<channel_impl::context_state> state_;
};

} // namespace

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
    // After the descriptor exists, so the service shuts down before the reactor does.
    auto& service = boost::asio::use_service<context_service>(
        boost::asio::query(ex, boost::asio::execution::context));
    self->context_ = service.state();
    {
        std::lock_guard lock(self->context_->mutex);
        self->context_->channels.push_back(self.get());
    }
    boost::asio::dispatch(*self->strand_, [self] { self->wait(); });
    return self;
}

channel_impl::channel_impl(const executor_type& ex, rdma_event_channel* ch)
    : channel_(ch), executor_(ex), strand_(ex) {
    descriptor_.emplace(executor_type(*strand_), ch->fd);
}

channel_impl::~channel_impl() {
    // The last reference may go on the destroyer thread: the Asio parts go here only while
    // the context lives (else its shutdown took them already).
    if (context_) {
        std::lock_guard lock(context_->mutex);
        if (context_->alive) {
            std::erase(context_->channels, this);
            context_shutdown();
        }
    } else {
        context_shutdown(); // create() failed before the context knew us
    }
    rdma_destroy_event_channel(channel_); // librdmacm owns the fd and closes it
}

void channel_impl::remove_owner() noexcept {
    if (owners_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    // The last owner may go on the destroyer thread: post only into a living context (a
    // dead one has already let go of the descriptor).
    run_on_reader([self = shared_from_this()] { self->stop(); });
}

void channel_impl::context_shutdown() noexcept {
    stop();
    strand_.reset();
}

void channel_impl::wait() {
    if (stopped_ || !descriptor_) return;
    descriptor_->async_wait(boost::asio::posix::descriptor_base::wait_read,
                           [self = shared_from_this()](error_code ec) {
                               if (ec) return; // released: the channel is going away
                               self->drain();
                               self->wait();
                           });
}

// Edge-triggered readiness: read until EAGAIN, or events stay queued unseen (semantics A3).
void channel_impl::drain() {
    if (stopped_) return;
    std::lock_guard lock(route_mutex_);
    kick_pending_.store(false, std::memory_order_release); // what was moved before is read now
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

void channel_impl::stop() noexcept {
    stopped_ = true;
    // Aborts the wait (its handler drops our reference); never closes the fd.
    if (descriptor_ && descriptor_->is_open()) descriptor_->release();
    descriptor_.reset();
}

} // namespace rdmacm::detail
