#pragma once
// The shared state behind a cm_id or listener (compiled in src/cm/id_impl.cpp): the
// rdma_cm_id, its channel and executor, and the handlers of its outstanding operations.
// id_machine decides; this holds the handlers and does the I/O.
//
// Threads: on_event/on_request run on the channel's reader strand; start/cancel/close may
// run on any thread. One mutex guards the machine, the handlers and the queues; no handler
// is ever called under it (completions are posted to the id's executor).
//
// Lifetime of the rdma_cm_id (id_life): every librdmacm call on it made outside the mutex is
// counted (calls in flight: an operation's call, a call_guard's, a blocking call of
// synchronous mode), and so is a migration. The id is destroyed by whoever ends the last of
// them after close(): close() itself when nothing is in flight, else the thread whose call
// returns last, or the migration's end. Nobody waits for anybody: a close never destroys an
// id under a call, and a call never holds up the destroys of other ids.
#include "cm/channel_impl.hpp"
#include "common/context_bound.hpp"
#include "cm/handler_slots.hpp"
#include "cm/id_life.hpp"
#include "common/passkey.hpp"
#include "rdmacm/detail/id_machine.hpp"
#include "rdmacm/detail/id_handle.hpp"
#include "rdmacm/detail/op_call.hpp"
#include "rdmacm/event.hpp"

#include <chrono>
#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>
#include <variant>

namespace rdmacm {
struct connection_request;
}

namespace rdmacm::detail {

class id_impl final : public std::enable_shared_from_this<id_impl>, public context_user {
public:
    using executor_type = boost::asio::any_io_executor;
    using void_handler = id_handle::void_handler;
    using event_handler = id_handle::event_handler;
    using request_handler = id_handle::request_handler;
    using any_handler = id_handle::any_handler;

    // A new id on `channel`, its handlers run on `ex`; throws system_error
    // ("rdma_create_id") on failure.
    static std::shared_ptr<id_impl> create(std::shared_ptr<channel_impl> channel, const executor_type& ex,
                                           rdma_port_space ps);
    id_impl(passkey<id_impl>, std::shared_ptr<channel_impl> channel, const executor_type& ex, rdma_cm_id* id);
    ~id_impl();
    id_impl(const id_impl&) = delete;
    id_impl& operator=(const id_impl&) = delete;

    rdma_cm_id* native() const noexcept { return id_; }
    // A copy: a migration changes it.
    executor_type get_executor() const noexcept {
        std::lock_guard lock(mutex_);
        return executor_.get();
    }
    // The executor to post to, with the call into its context that the post is (none once
    // that context's shutdown has begun).
    bound_executor::entry enter_executor() const noexcept {
        std::lock_guard lock(mutex_);
        return executor_.enter();
    }

    // Starts an operation of `kind`: refused at once (posted) if the machine says so;
    // otherwise the handler waits for its event and `call` is made.
    void start(op_kind kind, any_handler handler, const op_call& call);

    // Completes `handler` with `ec` on `ex` (no id to start it on).
    static void refuse(const executor_type& ex, any_handler handler, error_code ec);

    // Aborts every outstanding operation (operation_aborted); the CM work already started
    // in the kernel goes on, its events are dropped.
    void cancel() noexcept;
    // cancel(), and the id is destroyed on the destroyer thread (a connection request never
    // accepted is rejected first). Idempotent.
    void close() noexcept;
    // close(), then `h` once the id is destroyed (posted on the id's executor).
    void close_when_destroyed(void_handler h);
    bool closed() const noexcept;

    // Moves the id to `target` (its handlers to `target_ex`): src/cm/migrate.cpp. Completes
    // `handler` on the new executor (the old one if it failed). A null `target` puts the
    // id in synchronous mode (its executor stays).
    void migrate(const std::shared_ptr<channel_impl>& target, const executor_type& target_ex, void_handler handler);
    // Several ids to one target at once (a rebalance), each as migrate() moves it; those that
    // share their old channel and executor move together: their migrate calls in one pass
    // while the old reader is idle, then one step on the old executor and one hop to the new
    // one for all of them instead of two posts per id.
    struct migrate_order {
        std::shared_ptr<id_impl> id;
        void_handler handler;
    };
    static void migrate_together(std::vector<migrate_order> orders, const std::shared_ptr<channel_impl>& target,
                                 const executor_type& target_ex);

    // Synchronous mode (src/cm/sync_mode.cpp): the blocking librdmacm call that starts an
    // operation of `kind`, and the event it waited for (empty if none came).
    cm_event call_sync(op_kind kind, const op_call& call, error_code& ec);
    // The id's next event, waiting up to `timeout` (negative: no limit).
    cm_event next_event_sync(std::chrono::milliseconds timeout, error_code& ec);
    // Held around a synchronous librdmacm call on the id (create_qp, reject, bind, listen):
    // librdmacm writes to the id's channel, so no such call may overlap rdma_migrate_id
    // (semantics F13/F15), and a close() meanwhile must not destroy the id under it.
    // Waits out a migrate call in progress (a single non-blocking kernel write); a
    // migration waits for the calls in flight (without blocking: the last one out moves
    // it on). Make the call on id(), which is null when the id is closed.
    class call_guard {
    public:
        explicit call_guard(id_impl& impl);
        ~call_guard();
        call_guard(const call_guard&) = delete;
        call_guard& operator=(const call_guard&) = delete;
        rdma_cm_id* id() const noexcept { return id_; }

    private:
        id_impl& impl_;
        rdma_cm_id* id_ = nullptr;
    };
    // What moves and closes with the id besides its CM events: its queue pair's completion
    // path (src/verbs/queue_pair.cpp). Completions are handed to the id's executor like events.
    class data_path {
    public:
        virtual ~data_path() = default;
        // Migration `move` (the id's count of moves begun) begins: completions are held from
        // now on.
        virtual void begin_move(std::uint64_t move) = 0;
        // Runs `then` once every completion already handed to the old executor is queued
        // there (`then` posts after them): on the poller's strand, or here.
        virtual void after_handed(std::function<void()> then) = 0;
        // Migration `move` ended (on `ex`): completions go to `ex` from now, held ones first.
        // Ignored once a later one began: an abandoned move's end is told out of the id's
        // lock (the review of F5-8's fix: a stale end undid a newer move's begin, or moved
        // the queue pair back after a newer move ended).
        virtual void end_move(const executor_type& ex, std::uint64_t move) = 0;
        // Outstanding operations complete with operation_aborted; no verbs call on the
        // queue pair starts any more.
        virtual void close() noexcept = 0;
        // After close(): returns once no verbs call on the queue pair is in flight (each is
        // a short non-blocking call), so the queue pair may be destroyed.
        virtual void wait_idle() noexcept = 0;
        // DISCONNECTED or DEVICE_REMOVAL: outstanding work is flushed (completes with
        // IBV_WC_WR_FLUSH_ERR) instead of waiting for a peer that is gone.
        virtual void connection_lost() noexcept = 0;
        // The queue pair is destroyed (on the destroyer thread), the id not yet: memory
        // registered on the device's protection domain must go now, or librdmacm's
        // destruction of the id cannot free that domain.
        virtual void queue_pair_destroyed() noexcept = 0;
    };
    // The id's queue pair was created with `dp`: it moves and closes with the id, and is
    // released after the id (and so its queue pair) is destroyed.
    // False when the id was closed meanwhile (the data path is closed then, and still goes
    // after the id).
    bool attach(const std::shared_ptr<data_path>& dp);

    // A listening id never migrates (semantics R6). At most `backlog` connection requests
    // wait for an accept (librdmacm's rule: 0 or less is the kernel's maximum, 1024); those
    // beyond are rejected, so that a flood the application does not accept grows nothing
    // and its peers learn at once.
    void set_listening(int backlog) noexcept;

    // Reader strands only.
    void on_event(const cm_event& ev);
    // `channel`: the reader's own (the listener's channel_ may be being let go of).
    void on_request(const std::shared_ptr<channel_impl>& channel, rdma_cm_id* new_id, const cm_event& ev);

    // A connection request nobody will accept: rejected and destroyed off the reader's
    // thread, its events dropped meanwhile.
    static void reject_request(const std::shared_ptr<channel_impl>& channel, rdma_cm_id* new_id);

    // The id's context shut down: its waiting handlers go, never called (context_user).
    void context_gone() noexcept override;

    // Marks a new id as an unanswered connection request: close() rejects it.
    void set_pending_request(bool pending) noexcept { pending_request_ = pending; }

private:
    // The constructor's, shared: told when its context shuts down.
    static std::shared_ptr<id_impl> make(std::shared_ptr<channel_impl> channel, const executor_type& ex,
                                         rdma_cm_id* id);
    struct canceller;
    struct completion {
        any_handler handler;
        error_code ec;
        cm_event event;
        std::shared_ptr<id_impl> new_id; // request: the new id
    };
    // Completes on the handler's executor: posted (never inside an initiating call), or,
    // from the reader, dispatched (inline when the reader already runs there).
    enum class how : bool { post, dispatch };
    // A hand-over's mode: dispatched, unless it counts a call into the id's context — then
    // posted there (by way of it, as Asio's own completions go), as no user code may run
    // before the call ends: a handler run inline on another executor could destroy that
    // context, whose shutdown waits for the call (the third review's D1).
    static how inline_unless_counted(const bound_executor::handover& to) noexcept {
        return to.call ? how::post : how::dispatch;
    }
    // `deferred`: an operation waiting for a migration to end, `generation` its serial.
    void cancel_one(op_kind kind, std::uint32_t generation, bool deferred) noexcept;
    // Puts a canceller in the handler's cancellation slot, if it has one.
    void install_canceller(any_handler& handler, op_kind kind, std::uint32_t generation, bool deferred);
    // Lock held on entry, released on return.
    void start_now(std::unique_lock<std::mutex>& lock, op_kind kind, any_handler handler, const op_call& call);
    // The machine's answer to an operation of `kind` starting, told whether the id has a
    // device (lock held).
    error_code start_in_machine(op_kind kind) noexcept;
    // Whether `call` (starting an operation of `kind`) can block in the kernel: it is made
    // on a thread of its own then, never the caller's (lock held).
    bool may_block(op_kind kind, const op_call& call) const noexcept;
    // Makes `call` outside the lock (counted in calls_in_flight_); returns locked. The
    // caller ends with after_call().
    error_code make_call(std::unique_lock<std::mutex>& lock, const op_call& call);
    // The call of an operation of `kind` started as `generation` returned `ec` (lock held
    // on entry, released on return): a failure completes the operation.
    void call_returned(std::unique_lock<std::mutex>& lock, op_kind kind, std::uint32_t generation, error_code ec);
    // A call in flight ended (lock held on entry, released on return): the last one out
    // moves a waiting migration on, or destroys a closed id.
    void after_call(std::unique_lock<std::mutex>& lock, bool blocking_sync = false);
    // Submits the destroy of a closed id once nothing is in flight (lock held on entry,
    // released on return).
    void release_if_idle(std::unique_lock<std::mutex>& lock);
    // Does what id_life answered, in its order (no lock held; post_end is end_migration's own).
    void follow(id_life::actions todo);
    // Completes the operation `ev` ends (dispatched: inline when the reader runs where its
    // handler does), or queues it for next_event. `from_reader`: an event of a moving id is
    // held instead (finish_migration replays what was held, not from the reader). `post`:
    // completions are posted (one posted before them would run after them otherwise).
    // Returns whether it posted a completion.
    bool deliver(const cm_event& ev, bool from_reader, bool post = false);
    void submit_destroy();
    void destroyed() noexcept; // on the destroyer thread: async_close's handlers complete
    // async_close's handlers, once the id is destroyed (posted), or left for the context's
    // shutdown to let go of.
    void hand_over_close_waiters() noexcept;
    // Marks the id moving to `target` (lock held; released when refused, after completing
    // `handler`). False when refused.
    bool begin_migration(std::unique_lock<std::mutex>& lock, const std::shared_ptr<channel_impl>& target,
                         const executor_type& target_ex, void_handler& handler);
    // Whether the migrate call may be made now (lock held); if not — the migration was
    // abandoned, or waits for the calls in flight, the last of which goes on — the lock is
    // let go of.
    bool ready_for_call(std::unique_lock<std::mutex>& lock);
    // The next step of a migration (lock held on entry, released on return): the migrate
    // call here if the old reader is idle, else on its strand; once no call is in flight.
    void migrate_step(std::unique_lock<std::mutex>& lock, how mode);
    void migrate_on_reader();
    // Tries again from the old channel's reader (lock held on entry, released on return).
    void migrate_later(std::unique_lock<std::mutex>& lock, how mode);
    // Makes the migrate call (lock held on entry, released on return); `mode` says whether
    // this runs inside the initiating call (post: the migration then ends from a post).
    // Returns what hands the id on (posts, maybe to a user's executor), for the caller to
    // run once it has let go of the routing lock (src/cm/migrate.cpp).
    struct hand_on;
    hand_on migrate_now(std::unique_lock<std::mutex>& lock, how mode);
    // Ends a migration that failed or was abandoned before its call, unless it is
    // settled already: at once, or (post) from the old executor, never inside the
    // initiating call.
    void end_migration(error_code ec, how mode);
    // Synchronous mode: why a blocking call cannot be made now (lock held).
    error_code sync_refusal(bool call) const;

    // Completes `handler` (the migrate handler) at the end.
    void finish_migration(error_code ec, void_handler& handler);
    // A move's end, which owns the move until it has run (src/cm/migrate.cpp).
    struct move_end;
    // The move's end was let go of without having run (its context shut down): so is the
    // move, and what it held for the id (events, deferred operations) goes with it.
    void abandon_migration() noexcept;
    // The move's end waits for a read elsewhere: the id holds its executor's work (waited).
    void hold_while_moving();
    // Completes a handler (or a batch) taken from the id: the id's work is let go of only
    // after it is handed over, even when one run inline throws (settle_after).
    void complete(completion&& c, how mode = how::post);
    void complete(std::vector<completion>& batch, how mode);
    struct settle_after {
        id_impl& self;
        ~settle_after();
    };
    static void complete(const executor_type& ex, completion&& c, how mode);
    // Lock held: keeps work on the id's executor while a handler waits in it.
    void update_busy() noexcept;
    bool busy_now() const noexcept; // lock held: whether a handler waits in the id
    void destroy() noexcept;        // destroyer thread, or the destructor when close() never ran

    std::shared_ptr<channel_impl> channel_;
    bound_executor executor_; // may be freed on the destroyer thread
    rdma_cm_id* id_;
    mutable std::mutex mutex_;
    id_machine machine_; // its operations
    id_life life_;       // its calls, its move, its close and destroy (synchronous: channel_ is null)
    handler_slots handlers_;
    // (Lists: libstdc++'s deque allocates a map and a node when it is made, ~420 bytes each
    // here, on every id; these stay empty for most ids, and a deque's node held one event
    // anyway.)
    std::list<cm_event> events_;                                        // for next_event
    std::list<std::pair<std::shared_ptr<id_impl>, cm_event>> requests_; // for request
    std::atomic<bool> pending_request_{false};
    // machine_.closed(), readable without the lock (native_handle() on every call of a
    // user's own librdmacm loop).
    std::atomic<bool> closed_{false};

    // Migration: while `migration_` is set, events go to its `held` and new operations to
    // its `deferred`, both replayed in order on the new executor before anything newer.
    struct deferred_start {
        op_kind kind;
        any_handler handler;
        op_call call;
        std::uint32_t serial; // its canceller's
    };
    struct migration {
        std::shared_ptr<channel_impl> target;
        executor_type target_executor; // (none to synchronous mode: the id keeps its executor)
        void_handler handler;          // until the call settles (id_life): then it goes with the continuation
        // It waited for calls in flight, or its end waits for a read on the target reader's
        // strand: no post of the move holds its context meanwhile, so the id does (busy, on
        // its executor — the old one until its end) until the move ends. Every other step of
        // a move is a post, which holds work of its own.
        bool waited = false;
        std::vector<cm_event> held{};
        std::vector<deferred_start> deferred{};
    };
    // In the id, not allocated: a move's state made and let go of per move (~150 instructions).
    std::optional<migration> migration_;
    std::uint64_t moves_ = 0; // begun: the number of the latest (its queue pair's ends name it)
    // Takes the move's state out of the id (to let go of out of the lock): it no longer moves.
    void take_migration(std::optional<migration>& into) noexcept {
        into = std::move(migration_);
        migration_.reset();
    }
    std::shared_ptr<data_path> data_path_;
    ibv_context* removed_device_ = nullptr; // DEVICE_REMOVAL came: released after destroy
    std::uint32_t deferred_serial_ = 0;
    int wake_fd_ = -1;             // synchronous mode: close() ends a blocking next_event
    std::uint32_t backlog_ = 1024; // listening: requests kept for an accept, at most
    // How many migrate calls were made (raised under the lock, after life_ says so): what a
    // call_guard that life_ told to wait waits on, outside the lock.
    std::atomic<std::uint32_t> migrate_calls_{0};
    // Its context's shutdown took its handlers (context_gone), or a move bound it to one
    // shut down: no context_gone is to come for what it holds now.
    bool left_context_ = false;
    std::vector<void_handler> close_waiters_{}; // async_close's, until destroyed
    bool busy_ = false;                         // what executor_ was last told (update_busy)
    bool connecting_at_close_ = false;          // a connect or accept was in flight: see destroy()
};

} // namespace rdmacm::detail
