#include "common/fd_reader.hpp"

#include "rdmacm/detail/call_error.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/system/system_error.hpp>

#include <fcntl.h>

namespace rdmacm::detail {

namespace {
using io_executor = boost::asio::io_context::executor_type;
} // namespace

fd_reader::fd_reader(const executor_type& ex, int fd, liveness keeps)
    : executor_(ex), strand_(make_strand(ex)), context_(state_of(ex)) {
    const auto* io = ex.target<io_executor>();
    if (keeps == liveness::operations && io) uncounted_ = &io->context();
    // Ourselves, not Asio: async_wait stops setting O_NONBLOCK in Boost 1.86 (semantics A4).
    int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
        throw boost::system::system_error(RDMACM_CALL_ERROR("fcntl(O_NONBLOCK)"));
    // An uncounted wait completes on the io_context itself (a strand's tracked executor would
    // be a second work held by the wait), then enters the strand.
    if (uncounted_)
        descriptor_.emplace(executor_, fd);
    else
        descriptor_.emplace(*strand_, fd);
}

void fd_reader::start() {
    {
        std::lock_guard lock(context_->mutex);
        if (!context_->alive) { // its shutdown came first: nothing runs there
            context_shutdown();
            return;
        }
        if (stop_asked_) return; // stopped before it started (a close, a move): nothing to read
        context_->add(this);
        if (!uncounted_) work_ = context_work::on(executor_);
    }
    // A first read: the fd may be readable already, and readiness is edge-triggered.
    // Posted: never inside the caller, who may hold locks the reader takes.
    run_on_reader([self = shared_from_this()] { self->read(then_wait); });
}

void fd_reader::read(bool arm) {
    bool drained;
    try {
        drained = on_readable();
    } catch (...) {
        // A handler run inline threw: out of run(), as Asio's own do. What the reader had
        // not read yet (no new edge will announce it) is read by another pass, which arms
        // the wait if this one was to.
        run_on_reader([self = shared_from_this(), arm] { self->read(arm); });
        throw;
    }
    if (stopped_) return; // (released: nothing to read again)
    if (!drained) // (a read failed: again after a pause — a kick's too, W5: its event announces itself no more)
        run_on_reader_after_a_pause([self = shared_from_this(), arm] { self->read(arm); });
    else if (arm)
        wait();
}

bool fd_reader::after_a_pause(std::function<void()> f) {
    auto call = call_into_context();
    if (!call) return false;
    auto timer = std::make_shared<boost::asio::steady_timer>(call->strand(), read_retry_pause);
    timer->async_wait([timer, f = std::move(f)](boost::system::error_code) { f(); });
    return true;
}

fd_reader::~fd_reader() { detach(); }

void fd_reader::detach() noexcept {
    // The last reference may go on any thread: the Asio parts go here only while the
    // context lives (else its shutdown took them already).
    std::lock_guard lock(context_->mutex);
    if (context_->alive) {
        context_->remove(this); // not there if never started
        context_shutdown();
    }
}

void fd_reader::context_shutdown() noexcept {
    stop();
    strand_.reset();
    executor_ = {};
}

bool fd_reader::on_reader_thread() {
    std::lock_guard lock(context_->mutex);
    return context_->alive && running_in(*strand_);
}

fd_reader::executor_type fd_reader::make_strand(const executor_type& ex) {
    if (const auto* e = ex.target<io_executor>()) return boost::asio::strand<io_executor>(*e);
    return boost::asio::strand<executor_type>(ex);
}

bool fd_reader::running_in(const executor_type& strand) {
    if (const auto* s = strand.target<boost::asio::strand<io_executor>>()) return s->running_in_this_thread();
    return strand.target<boost::asio::strand<executor_type>>()->running_in_this_thread();
}

void fd_reader::wait() {
    if (stopped_ || !descriptor_) return;
    if (!uncounted_) {
        descriptor_->async_wait(boost::asio::posix::descriptor_base::wait_read,
                                [self = shared_from_this()](boost::system::error_code ec) { self->on_wait(ec); });
        return;
    }
    counted_back_.store(false, std::memory_order_relaxed);
    descriptor_->async_wait(boost::asio::posix::descriptor_base::wait_read,
                            [self = shared_from_this()](boost::system::error_code ec) mutable {
                                self->count_back(); // (see uncounted_)
                                auto& strand = *self->strand_.value().target<boost::asio::strand<io_executor>>();
                                boost::asio::dispatch(strand, [self = std::move(self), ec] { self->on_wait(ec); });
                            });
    uncounted_->get_executor().on_work_finished();
}

void fd_reader::on_wait(boost::system::error_code ec) {
    if (ec == boost::asio::error::operation_aborted || stopped_) return; // released: going away
    if (ec) // the wait failed (epoll_ctl's error): read, and wait again, after a pause (W6)
        run_on_reader_after_a_pause([self = shared_from_this()] { self->read(then_wait); });
    else
        read(then_wait);
}

void fd_reader::count_back() noexcept {
    if (uncounted_ && !counted_back_.exchange(true, std::memory_order_acq_rel))
        uncounted_->get_executor().on_work_started();
}

void fd_reader::stop() noexcept {
    stopped_ = true;
    work_ = {};
    count_back(); // before the release queues the aborted wait
    // Aborts the wait (its handler drops our reference); never closes the fd.
    if (descriptor_ && descriptor_->is_open()) descriptor_->release();
    descriptor_.reset();
}

} // namespace rdmacm::detail
