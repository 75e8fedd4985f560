#pragma once
// A file descriptor that some other library owns (an rdma_event_channel's, an
// ibv_comp_channel's), read on a strand of an execution context through an Asio descriptor
// that never closes it (compiled in src/common/fd_reader.cpp).
//
// Lifetime: the Asio parts (strand, descriptor) are bound to the execution context
// (context_bound), so the last reference may go on any thread, even after it is gone.
//
// What keeps the context running: a reader of the user's (an event_channel) does, from
// start() to stop(). A reader of the context's own (its event channel, its completion
// channels) waits for its fd whenever the context runs, but keeps it running no more than
// an Asio socket with no operation pending does: operations of its ids and queue pairs do
// (bound_executor). What arrives while run() has returned stays in the kernel's queue, and
// is read when the context runs again.
#include "common/context_bound.hpp"
#include "common/post_on.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/basic_stream_descriptor.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

namespace rdmacm::detail {

class fd_reader : public context_bound, public std::enable_shared_from_this<fd_reader> {
public:
    using executor_type = boost::asio::any_io_executor;
    // What keeps the reader's context running (above): the reader, or the operations waiting.
    enum class liveness { reader, operations };

    virtual ~fd_reader();
    fd_reader(const fd_reader&) = delete;
    fd_reader& operator=(const fd_reader&) = delete;

    // A copy; empty once the context has shut down.
    executor_type get_executor() const {
        std::lock_guard lock(context_->mutex);
        return executor_;
    }

    // Runs f on the reader's strand, unless the execution context is shutting down (false
    // then).
    template <typename F>
    bool run_on_reader(F&& f) {
        auto call = call_into_context();
        if (!call) return false;
        post_on(call->strand(), std::forward<F>(f));
        return true;
    }

    // Runs f on the reader's strand after a pause (a read that failed with anything but
    // EAGAIN — ENOMEM — would fail again at once: the fd stays readable, and an immediate
    // retry would spin a thread until memory came back), or here when the context is gone
    // (nothing reads then). (Rare: its allocations do not matter.)
    template <typename F>
    void run_on_reader_after_a_pause(F f) {
        auto shared = std::make_shared<F>(std::move(f));
        if (!after_a_pause([shared] { (*shared)(); })) (*shared)();
    }
    // Runs f on the reader's strand after a pause, unless the execution context is shutting
    // down (false then, f let go of).
    bool after_a_pause(std::function<void()> f);
    static constexpr std::chrono::milliseconds read_retry_pause{10};

    // Runs f on the reader's strand, or here when the context is gone (nothing reads then).
    template <typename F>
    void run_on_reader_or_here(F f) {
        if (auto call = call_into_context())
            post_on(call->strand(), std::move(f));
        else
            f();
    }

    // Stops reading (on the strand): never closes the fd. A start() from then on is refused.
    void stop_later() {
        {
            std::lock_guard lock(context_->mutex);
            stop_asked_ = true;
        }
        run_on_reader([self = shared_from_this()] { self->stop(); });
    }

    void context_shutdown() noexcept override;
    // The state of the context the reader runs on.
    const state* context_state() const noexcept { return context_.get(); }

protected:
    // Reads `fd` (made non-blocking here) on a strand of `ex`; throws system_error.
    // liveness::operations on an io_context's own executor (whose work count the wait is
    // taken out of); on any other executor the reader keeps its context running.
    fd_reader(const executor_type& ex, int fd, liveness keeps);
    // Registers with the context and starts waiting; once, after construction.
    void start();
    // The fd is readable: read it to EAGAIN (edge-triggered readiness, semantics A3).
    // False if a read failed otherwise (the fd still readable: read again after a pause).
    virtual bool on_readable() = 0;
    // On the strand: whether this thread runs it now.
    bool on_reader_thread();
    void stop() noexcept;
    // Lets go of the descriptor (idempotent): before whoever owns the fd closes it.
    void detach() noexcept;
    bool stopped() const noexcept { return stopped_; } // on the strand

    // on_readable(), on the strand, then, if `arm`, the wait for the next readiness; when
    // it throws, the reader reads on (another pass is posted) and the exception goes on to
    // run(). A pass out of turn (a kick) does not arm: the wait is armed already. A pass
    // whose read failed (not EAGAIN) reads again after a pause instead of arming the wait,
    // which would fire at once.
    // The wait is armed after the pass, not before it: arming is a system call (Asio
    // re-registers the fd, EPOLL_CTL_MOD, for a wait that never reads speculatively) that
    // would otherwise come before every handler the pass runs — the reply a handler sends.
    // After it, nothing is missed: EPOLL_CTL_MOD polls the fd, so readiness that came
    // during the pass wakes the next one.
    void read(bool arm = false);

private:
    // A post to the strand, made outside the state's mutex: the strand runs on the user's
    // executor, which may call back into the library (a custom executor's execute() closing
    // an id). Counted, so that the context's shutdown waits for it; its copy of the strand
    // goes before the shutdown may go on.
    class context_call {
    public:
        context_call(state& context, const executor_type& strand) // under its mutex
            : call_(context), strand_(strand) {}
        executor_type& strand() { return strand_; }

    private:
        call_in_progress call_; // (first: it ends after the strand's copy went)
        executor_type strand_;
    };
    // Empty once the context's shutdown began.
    std::optional<context_call> call_into_context() {
        std::lock_guard lock(context_->mutex);
        if (context_->closing) return std::nullopt;
        return std::optional<context_call>(std::in_place, *context_, *strand_);
    }

    static constexpr bool then_wait = true;
    void wait();
    void on_wait(boost::system::error_code ec); // on the strand
    void count_back() noexcept;                 // the pending wait's unit (see counted_back_)
    // A strand of `ex`: of the io_context's own executor when that is what `ex` holds, so
    // that a wake-up goes through one type-erased executor, not two (a strand of an
    // any_io_executor wraps it again, and is too big to sit in an any_io_executor in place:
    // every copy, and the work each wait tracks, allocated).
    static executor_type make_strand(const executor_type& ex);
    static bool running_in(const executor_type& strand);

    executor_type executor_;
    // liveness::reader: outstanding work on the context from start() to stop(): the context
    // runs until the reader stops (the last owner gone: every id destroyed). The pending wait
    // alone does not hold it from one wait to the next (scale_test saw run() return, work
    // count zero, with the wait still armed).
    context_work work_;
    // liveness::operations: the io_context whose count of outstanding work leaves out the
    // pending wait (null: liveness::reader). Asio counts a pending wait as one work (its
    // reactor's start_op; the descriptor's executor is the io_context's own, so no tracked
    // executor is held beside it — detail::handler_work): the count is let go of as the wait
    // starts and taken again as its handler begins, before the scheduler lets go of it after
    // the handler. Both on a thread inside run(), in a handler that holds work itself, so
    // the count never reaches zero by our doing but after a handler, as Asio's own do.
    boost::asio::io_context* uncounted_ = nullptr;
    // Whether the pending wait's unit is counted again (true: none pending). Whoever comes
    // first counts it back: the wait's handler as it begins, or stop(), whose release()
    // queues the aborted wait with no work of its own (the context would stop with the
    // handler, and the reader it holds, still queued). They may race: a wait completing on
    // one thread as stop() runs on the strand.
    std::atomic<bool> counted_back_{true};
    // The reader's strand (see make_strand), the descriptor's executor: its every wake-up
    // runs through it.
    std::optional<executor_type> strand_;
    std::optional<boost::asio::posix::basic_stream_descriptor<executor_type>> descriptor_;
    std::shared_ptr<state> context_;
    bool stopped_ = false;    // on the strand
    bool stop_asked_ = false; // under the context's mutex: a later start() would race the stop
};

} // namespace rdmacm::detail
