#include "rdmacm/receive_pool.hpp"

#include "verbs/receive_pool_impl.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>

#include <limits>
#include <stdexcept>

namespace rdmacm::detail {

namespace {
constexpr std::uint32_t no_slot = std::numeric_limits<std::uint32_t>::max();
// The pool's receives wait for messages nobody may have asked for: they keep the context
// running no more than a socket's buffer does (async_receive's wait does).
constexpr bool standing_receive = true;
} // namespace

std::shared_ptr<receive_pool_impl> receive_pool_impl::create(std::shared_ptr<qp_impl> qp, std::size_t depth,
                                                             std::size_t message_size) {
    ibv_qp* native = qp ? qp->native() : nullptr; // (none once closed, also by its id's close)
    if (!native) throw boost::system::system_error(errc::not_open, "receive_pool: its queue pair");
    if (!receive_pool_base::valid_sizes(depth, message_size))
        throw std::invalid_argument("receive_pool: depth and message size must be in 1 .. 2^32 - 2");
    std::shared_ptr<receive_pool_impl> pool(new receive_pool_impl(std::move(qp), native->pd, depth, message_size));
    pool->qp_->on_destroyed([m = pool->memory_] { m->region.reset(); });
    pool->qp_->also_tell_when_context_gone(pool);
    for (std::size_t i = 0; i < depth; ++i) pool->post(static_cast<std::uint32_t>(i));
    return pool;
}

receive_pool_impl::receive_pool_impl(std::shared_ptr<qp_impl> qp, ibv_pd* pd, std::size_t depth,
                                     std::size_t message_size)
    : qp_(std::move(qp)), slot_size_(message_size) {
    std::vector<std::byte> buffer(depth * message_size);
    memory_region region(pd, buffer);
    memory_ = std::make_shared<memory>(memory{std::move(buffer), std::move(region)});
}

void receive_pool_impl::post(std::uint32_t slot) {
    const auto* base = memory_->buffer.data() + std::size_t{slot} * slot_size_;
    const ibv_sge sge{reinterpret_cast<std::uintptr_t>(base), static_cast<std::uint32_t>(slot_size_),
                      memory_->region.lkey()};
    // Held by the receive: the device may write into the buffer until it completes.
    qp_->post(
        {work_request::kind::receive, std::span(&sge, 1)},
        [self = shared_from_this(), slot](error_code ec, std::size_t n) {
            self->arrived({ec, slot, static_cast<std::uint32_t>(n)});
        },
        standing_receive);
}

void receive_pool_impl::give_back(std::uint32_t slot) noexcept {
    {
        std::lock_guard lock(mutex_);
        if (closed_ || broken_) return; // nobody takes it, or the queue pair would flush it
    }
    try {
        post(slot);
    } catch (...) {
        // Out of memory for the receive's handler: the buffer stays out of use.
    }
}

void receive_pool_impl::arrived(arrival a) {
    std::unique_lock lock(mutex_);
    if (closed_) return; // nobody takes it: its buffer goes with the pool
    if (a.ec) {
        // The queue pair is in error: every other receive is flushed too. The first error
        // is kept: it is what a receive gets once the messages before it are taken.
        if (broken_) return;
        broken_ = a.ec;
        a.slot = no_slot;
    }
    arrived_.push_back(a);
    if (!waiting_) return;
    woken_ = waiting_->id;
    auto h = take_waiting(); // (its post, below, holds the context's work from here)
    woken_cancelled_ = false;
    lock.unlock();
    wake(std::move(h));
}

void receive_pool_impl::receive(handler h) {
    const std::uint64_t id = next_wait_++; // (one caller at a time)
    // In place before the operation can complete on another thread: a slot assigned after
    // its completion would replace the canceller of the handler's next operation.
    // Every type: ending the wait loses nothing, the next message waits for the next call.
    auto slot = boost::asio::get_associated_cancellation_slot(h);
    if (slot.is_connected())
        slot.assign([weak = weak_from_this(), id](boost::asio::cancellation_type) {
            if (auto self = weak.lock()) self->cancel(id);
        });
    std::unique_lock lock(mutex_);
    if (closed_ || waiting_ || woken_) {
        const error_code ec = closed_ ? errc::not_open : errc::operation_in_progress;
        lock.unlock();
        auto to = qp_->enter_executor();
        refuse(to.executor, std::move(h), ec);
        return;
    }
    if (arrived_.empty() && !broken_) {
        waiting_.emplace(waiter{std::move(h), id});
        qp_->waiting_beside(+1); // the context runs while it waits, wherever the queue pair moves
        return;
    }
    woken_ = id;
    woken_cancelled_ = false;
    lock.unlock();
    wake(std::move(h));
}

void receive_pool_impl::cancel(std::uint64_t id) noexcept {
    std::unique_lock lock(mutex_);
    if (woken_ == id) {
        woken_cancelled_ = true; // its handler, about to run, finds out
        return;
    }
    if (!waiting_ || waiting_->id != id) return; // completed already
    auto h = take_waiting();
    lock.unlock();
    abort(std::move(h));
}

void receive_pool_impl::close() noexcept {
    std::unique_lock lock(mutex_);
    closed_ = true;
    arrived_.clear(); // their buffers are not posted again (a woken operation is aborted)
    if (!waiting_) return;
    auto h = take_waiting();
    lock.unlock();
    abort(std::move(h));
}

void receive_pool_impl::context_gone() noexcept {
    handler gone; // destroyed outside the lock: a frame it holds may close the pool
    std::lock_guard lock(mutex_);
    if (waiting_) gone = take_waiting();
}

receive_pool_impl::handler receive_pool_impl::take_waiting() noexcept {
    auto h = std::move(waiting_->h);
    waiting_.reset();
    qp_->waiting_beside(-1);
    return h;
}

// Never inside the initiating call: queued on the queue pair's executor, from there on the
// handler's own, where deliver() decides what it gets.
void receive_pool_impl::wake(handler h) {
    auto to = qp_->enter_executor(); // (from a receive's caller: maybe not the context's thread)
    const auto& ex = to.executor;
    if (!ex) return; // the context has shut down: nothing runs there any more
    boost::asio::post(ex, [self = shared_from_this(), h = std::move(h), ex]() mutable {
        auto handler_ex = boost::asio::get_associated_executor(h, ex);
        boost::asio::dispatch(handler_ex,
                              [self = std::move(self), h = std::move(h)]() mutable { self->deliver(std::move(h)); });
    });
}

void receive_pool_impl::deliver(handler h) {
    std::unique_lock lock(mutex_);
    arrival a{boost::asio::error::operation_aborted, no_slot, 0}; // cancelled, or closed meanwhile
    if (!woken_cancelled_ && !arrived_.empty()) {
        a = arrived_.front();
        arrived_.pop_front();
    } else if (!woken_cancelled_ && !closed_ && broken_) {
        a = {broken_, no_slot, 0};
    }
    woken_.reset();
    lock.unlock();
    received_message message;
    if (!a.ec && a.slot != no_slot)
        message = access::make<received_message>(shared_from_this(), a.slot, data(a.slot, a.size));
    std::move(h)(a.ec, std::move(message));
}

void receive_pool_impl::abort(handler h) {
    auto to = qp_->enter_executor(); // (a call into the context until the post is made: W7)
    refuse(to.executor, std::move(h), boost::asio::error::operation_aborted);
}

void receive_pool_impl::refuse(const boost::asio::any_io_executor& ex, handler h, error_code ec) {
    if (!ex) return;
    boost::asio::post(ex, boost::asio::append(std::move(h), ec, received_message{}));
}

receive_pool_base::receive_pool_base(executor_type ex, const std::shared_ptr<qp_impl>& qp, std::size_t depth,
                                     std::size_t message_size)
    : io_handle(std::move(ex), receive_pool_impl::create(qp, depth, message_size)) {}

const memory_region& receive_pool_base::region() const {
    if (!impl_) throw boost::system::system_error(errc::not_open, "receive_pool::region");
    return impl_->region();
}

std::size_t receive_pool_base::message_size() const noexcept { return impl_ ? impl_->message_size() : 0; }

void receive_pool_base::close() noexcept {
    if (auto impl = std::move(impl_)) impl->close();
}

receive_pool_base::executor_type receive_pool_base::current_executor(const std::shared_ptr<receive_pool_impl>& impl,
                                                                     const executor_type& fallback) {
    return impl ? impl->executor() : fallback;
}

void receive_pool_base::receive(const std::shared_ptr<receive_pool_impl>& pool, const executor_type& fallback,
                                handler h) {
    if (pool)
        pool->receive(std::move(h));
    else
        receive_pool_impl::refuse(fallback, std::move(h), errc::not_open);
}

} // namespace rdmacm::detail

void rdmacm::received_message::give_back() noexcept {
    if (auto pool = std::move(pool_)) pool->give_back(slot_);
}
