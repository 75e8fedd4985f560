#pragma once
// The shared state behind a queue_pair (compiled in src/verbs/queue_pair.cpp): the completion
// queue, reporting to its context's shared completion channel (completion_channel.hpp), and
// the handlers of the work requests outstanding on the queue pair.
//
// Threads: work requests are posted from any thread; completions are polled on the strand
// of the queue pair's reader on its current context (one poller at a time, even while a
// migration moves the queue pair from one context's reader to another's) and handed to the
// id's executor, in completion order, like CM events: held while the id moves, replayed on
// the new executor first (id_impl::data_path). Only the current poller hands over, on its
// reader's strand and with no lock held; a pass on a poller the queue pair has left parks
// what it polled for the current one.
//
// Polling mode (queue_pair_options::poll_for): the current poller, once woken, goes on
// polling in slices posted to its strand (no system call per completion), and re-arms the
// queue and sleeps only when it has been idle long enough or nothing can complete (adaptive:
// nothing posted; busy: no operation awaited).
#include "verbs/completion_channel.hpp"
#include "cm/id_impl.hpp"
#include "common/passkey.hpp"
#include "verbs/qp_machine.hpp"
#include "rdmacm/detail/queue_pair_base.hpp"
#include "verbs/work_request_table.hpp"

#include <infiniband/verbs.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace rdmacm {
struct queue_pair_options;
}

namespace rdmacm::detail {

class qp_impl : public id_impl::data_path,
                public cq_event_sink,
                public context_user,
                public std::enable_shared_from_this<qp_impl> {
    struct cq_resources;

public:
    using executor_type = boost::asio::any_io_executor;
    using handler = queue_pair_base::handler;

    // Creates the completion queue, and the queue pair on `id` (through
    // rdma_create_qp), and attaches to it; throws system_error naming the failed call.
    static std::shared_ptr<qp_impl> create(const std::shared_ptr<id_impl>& id, const queue_pair_options& options);
    qp_impl(passkey<qp_impl>, const executor_type& ex, std::shared_ptr<cq_resources> res,
            std::chrono::nanoseconds poll_for);
    ~qp_impl() override;

    // Null once closed (by the queue pair's close or its id's): the id's destroy, which
    // takes the queue pair along, may come at any time after.
    ibv_qp* native() const noexcept { return closing_.load(std::memory_order_acquire) ? nullptr : qp_; }
    ibv_cq* cq() const noexcept { return resources_->cq; }
    executor_type get_executor() const {
        std::lock_guard lock(mutex_);
        return executor_.get();
    }
    // The executor to post to from a thread that may not run its context, with the call into
    // that context the post is (none once its shutdown began): the shutdown waits for it
    // (the third review's F2, for the data path: the whole-core review's W7).
    bound_executor::entry enter_executor() const noexcept;

    // Why an operation of `what` on the buffers `found` is refused before anything is
    // posted (none: it may go).
    error_code refusal(work_request::kind what, const gathered_buffers& found) const noexcept;
    bool fits_inline(std::span<const ibv_sge> buffers) const noexcept;
    // Posts `wr` (not refused); `h` completes with the work completion's status and byte
    // count. A terminal cancellation through `h`'s slot puts the queue pair in error (see cancel).
    // A `standing` one (a receive pool's receive) keeps its context running only once the
    // queue pair is closed and it waits for its flush: what nobody waits for yet keeps
    // nothing running, as the bytes in a socket's buffer do not.
    void post(const work_request& wr, handler h, bool standing = false);
    // Posts a chain of up to four sends, writes and reads in one call, only the last
    // signalled: `h` completes with the last's completion (RC completes a send queue in
    // order: the others are done by then), or with the first error of any of them.
    void post(std::span<const work_request> chain, handler h, bool standing = false);
    // Completes `h` with `ec` on `ex` (nothing to post it on).
    static void refuse(const executor_type& ex, handler h, error_code ec);

    // id_impl::data_path
    void begin_move(std::uint64_t move) override;
    void after_handed(std::function<void()> then) override;
    void end_move(const executor_type& ex, std::uint64_t move) override;
    void close() noexcept override;
    void wait_idle() noexcept override;
    void connection_lost() noexcept override;
    void queue_pair_destroyed() noexcept override;
    // `release` runs once the queue pair is destroyed, before the id: it deregisters memory
    // the device may write into until then (a receive_pool's), which must not outlive the id.
    void on_destroyed(std::function<void()> release);
    // A receive pool's operation waits (+1) or no longer does (-1): the queue pair holds its
    // context's work meanwhile, and takes it along when it moves (as for its own operations).
    void waiting_beside(int change) noexcept;
    // `user` (a receive_pool, which holds an operation's handler of its own) is told after
    // the queue pair when the context the queue pair is on shuts down: its handler must go
    // with the context too, or a coroutine frame waiting in it keeps the whole connection.
    void also_tell_when_context_gone(std::weak_ptr<context_user> user);
    // cq_event_sink
    void cq_event(const completion_reader& by) override;
    // context_user: the context the queue pair is on shut down; its waiting handlers go,
    // never called (their work requests' buffers: the device's, as at any shutdown).
    void context_gone() noexcept override;

private:
    // The completion queue; its events as readers see them.
    struct cq_resources {
        explicit cq_resources(std::shared_ptr<completion_channel> channel) : events(std::move(channel)) {}
        ~cq_resources();
        ibv_cq* cq = nullptr;
        std::mutex poll_mutex; // one poller at a time: completions stay in order
        cq_events events;      // the CQ's cq_context: outlives its destroy
    };
    class poller;
    struct completion {
        handler h;
        error_code ec;
        std::size_t bytes;
    };

    // What a pass over the completion queue does besides polling it to empty.
    enum class pass : std::uint8_t {
        only_poll,
        arm, // re-arms the queue first (to sleep: what completed before the re-arm is polled)
    };
    struct pass_result {
        bool current;     // `by` is the queue pair's poller, and the queue pair open
        bool found;       // the queue held completions other than a standing send's (see poll)
        bool outstanding; // an operation waits (busy_now: not a pool's standing receives alone)
        bool posted;      // a work request is posted, standing ones too: something may complete
        bool unarmed;     // an arm the device refused: no event will wake the queue pair
    };

    // The scatter/gather entries one work request may have, as the queue pair was made, and
    // the bytes a send or write may carry inline (as asked: at most what the device granted).
    struct buffer_limits {
        std::uint32_t send = 0, receive = 0, read = 0; // (read: also the device's max_sge_rd)
        std::uint32_t inline_bytes = 0;
    };
    // What ibv_poll_cq reported of a work request.
    struct polled_completion {
        std::uint64_t wr_id;
        std::uint32_t bytes;
        ibv_wc_status status;
        bool received; // a receive's (the opcode: valid when the status is success)
    };
    pass_result poll(poller& by, pass p); // on the strand of `by`
    // A pass after an event (or asked for), on `by`'s strand; in polling mode it then spins
    // unless `by` spins already.
    void wake(const std::shared_ptr<poller>& by);
    void spin(const std::shared_ptr<poller>& by); // polling mode: one slice, then again or to sleep
    // To sleep: re-armed and polled once more. An arm the device refused would leave nothing
    // to wake the queue pair: a pass after a pause tries again.
    void sleep(const std::shared_ptr<poller>& by);
    // Runs wake(current poller) on its strand (for an event another context read, for
    // completions held or to be flushed); false if that reader's context is gone.
    bool wake_later(const std::shared_ptr<poller>& current);
    // Whether the current poller is on another context than `ex`'s (under mutex_).
    bool polls_elsewhere(const executor_type& ex) const;
    bool polling() const noexcept { return poll_for_ > std::chrono::nanoseconds::zero(); } // (negative: as zero)
    void begin_verbs_call() noexcept; // under mutex_, once the machine let it go
    void end_verbs_call() noexcept;
    void hand_over(std::vector<completion>& done, const executor_type& ex, bool may_run_inline);
    // Under mutex_, closed with no flush to poll for: what a pass would hand over, in order
    // (held ones, then, if the machine says so, the outstanding ones, aborted).
    std::vector<completion> take_left_over();
    // Posts them to `ex` (none: they go), outside mutex_.
    void post_left_over(std::vector<completion>& left, const executor_type& ex);
    // Puts the queue pair in the error state (a verbs call begun by the caller, ended here):
    // the device flushes every work request; what it has not flushed after flush_grace is
    // flushed by a pass on the queue pair's context then (none if that has shut down).
    // Refused (ibv_modify_qp failed), no grace: the device may still write every buffer.
    void flush() noexcept;
    void flush_after_grace(const executor_type& ex); // the pass that flushes the rest, on `ex`
    // Handlers taken to go now (a close with no context, a shutdown), after the device was
    // told: they go here, or, if it refused, with the queue pair's destroy (kept_).
    void let_go_once_safe(std::vector<handler>& handlers) noexcept;
    // Terminal cancellation of work request `wr_id`: a posted work request cannot be
    // recalled, so the queue pair goes to the error state (as when the connection is lost)
    // and the request completes with operation_aborted once the device flushed it (its
    // buffer stays the device's until then; done before that, it completes as done); the
    // others complete with IBV_WC_WR_FLUSH_ERR.
    void cancel(std::uint64_t wr_id) noexcept;
    // What `wr_id` completes with, given the device's `ec` (under mutex_).
    error_code outcome(std::uint64_t wr_id, error_code ec);
    // `h`'s completion, given what the device reported of `wr_id` (under mutex_): once the
    // queue pair is closed, operation_aborted whatever it was; else outcome().
    completion completed(handler h, std::uint64_t wr_id, error_code ec, std::size_t bytes);
    // After handlers taken from the queue pair were handed over (a post makes work of its
    // own): no work kept on the executor once none waits (bound_executor).
    void settle() noexcept;
    void update_busy() noexcept;    // under mutex_
    bool busy_now() const noexcept; // under mutex_: whether a handler waits in the queue pair

    std::shared_ptr<cq_resources> resources_;
    const std::chrono::nanoseconds poll_for_;
    ibv_qp* qp_ = nullptr; // owned by the id: destroyed with it
    buffer_limits limits_; // set before the queue pair is shared
    mutable std::mutex mutex_;
    bound_executor executor_;        // may be freed on the destroyer thread
    std::shared_ptr<poller> poller_; // on the context the queue pair is on
    work_request_table<handler> outstanding_;
    std::vector<std::uint64_t> cancelled_; // outstanding, cancelled: complete with operation_aborted
    std::vector<std::function<void()>> on_destroyed_;
    std::vector<std::weak_ptr<context_user>> also_gone_; // told after context_gone
    // Handlers to go at once whose device refused the error state: their buffers are the
    // device's until the queue pair is destroyed, and they go then (queue_pair_destroyed).
    std::vector<handler> kept_;
    qp_machine machine_; // closed, in error, what the device was told (qp_machine.hpp)
    bool moving_ = false;
    std::uint64_t move_ = 0;       // the latest of its id's moves begun (an end of an earlier one is stale)
    bool busy_ = false;            // what executor_ was last told
    int waiting_beside_ = 0;       // receive pools' waiting operations (waiting_beside)
    std::vector<completion> held_; // while moving, and until the current poller hands them over
    // Closed with work requests outstanding: itself, until they are flushed (the user and the
    // id may let go of it first). Let go of on the destroyer thread, where the CQ then goes.
    std::shared_ptr<qp_impl> flushing_;
    std::atomic<int> verbs_calls_{0}; // posts and ibv_modify_qp made outside mutex_
    std::atomic<bool> closing_{false};
};

} // namespace rdmacm::detail
