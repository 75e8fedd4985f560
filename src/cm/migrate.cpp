// rdma_migrate_id as an asynchronous operation (semantics.md sections 1, 4 and 6).
//
//  1. Any thread: the id is marked moving. From here its events are held and new
//     operations deferred; nothing of the id starts on the old channel any more.
//  2. rdma_migrate_id, once no librdmacm call on the id is in flight (the last call out
//     goes on from here), while neither the old channel's reader nor the target's can
//     read (semantics F14, R4, R8): at once when the old reader is idle (its route taken
//     without waiting) or this thread runs it, else on its strand; the target's reader is
//     kept out for the call by its read lock (at most one non-blocking read of its own to
//     wait out). The target gains an owner at step 1, so its reader keeps reading for the
//     id whatever its other owners do meanwhile. Every event the old reader
//     read for the id was routed before, and acked when read, so the call never waits
//     for acks (R1). Queued, unread events move with the id in the kernel (semantics F2)
//     without a wake-up: the target's reader reads them at step 3; later ones arrive on the
//     new channel.
//  3. The old executor: a marker that runs after every handler of the id posted there; then,
//     if events may have moved along, a look at the target (a poll, its route taken
//     without waiting) and, if anything waits there or its reader is busy, a read on
//     its reader's strand (the id holds what it finds) before step 4. Looks and reads are
//     made one at a time, each move's after its own call (review F5).
//  4. The new executor: held events, then deferred operations, in order, then newer ones
//     (R5); the id's executor is the new one; the migrate handler completes.
// On failure the id stays on its old channel and executor with nothing lost (step 4 runs
// there instead).
//
// Moved together (migrate_together: a rebalance), ids on one channel make step 2 in one pass
// of the old reader, then steps 3 and 4 as one post (and one read) for all of them.
//
// Synchronous mode (semantics F4, F5) is a migration to no channel: librdmacm's private channel. It
// is refused while anything of the id is queued or expected (an event read but not
// delivered, an operation outstanding), and undone when the kernel moved a queued event
// along: librdmacm's next blocking call would take it for its own. Back from synchronous
// mode, the target channel's reader makes the call.
#include "rdmacm/detail/call_error.hpp"
#include "cm/id_impl.hpp"
#include "cm/move_machine.hpp"
#include "common/post_on.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace rdmacm::detail {

namespace {
// What an emplace builds in place from a call's result: the conversion's prvalue initializes
// the object itself (no move of it: a hand_on's move is ~150 instructions).
template <typename Call>
struct built_by {
    Call call;
    operator std::invoke_result_t<Call&>() { return call(); }
};
template <typename Call>
built_by(Call) -> built_by<Call>; // (clang before 17 deduces no aggregate's arguments)
} // namespace

// A move's end: finish_migration, on the new executor (the old one if the call failed).
// It owns the move until it has run: one let go of without having run — posted to a
// context that shut down before running it, or with nowhere to run — lets go of the move
// where it is destroyed (abandon_migration), so that no move stays half done with its
// parts on a context that is gone.
struct id_impl::move_end {
    std::shared_ptr<id_impl> self;
    error_code ec;
    void_handler handler;
    bool ran = false;

    move_end(std::shared_ptr<id_impl> id, error_code e, void_handler h) noexcept
        : self(std::move(id)), ec(e), handler(std::move(h)) {}
    move_end(move_end&&) noexcept = default; // (the moved-from one has no id: it does nothing)
    move_end& operator=(move_end&&) = delete;
    ~move_end() {
        if (!self || ran) return;
        for ([[maybe_unused]] auto action : move_course(move_place::dropped, {})) // (abandon: asserted below)
            self->abandon_migration();
    }
    void operator()() {
        ran = true;
        self->finish_migration(ec, handler);
    }
};
static_assert(move_course(move_place::dropped, {}).size == 1 &&
              move_course(move_place::dropped, {}).list[0] == move_action::abandon);

namespace {
// A move's step for the old executor, as posted there: run, it goes on. Let go of without
// having run — the old context shut down with it queued (its shutdown may begin between the
// move's recheck of the executor and this post: the fresh review of 2026-12-05, M1), or the
// queue pair's poller dropped it — it does what move_course says at `step_dropped`: a move
// with somewhere else to end goes on there from here; one with nowhere lets the step's end,
// and with it the move, go.
template <typename Then>
class old_step {
public:
    old_step(Then then, bool somewhere) : then_(std::move(then)), somewhere_(somewhere) {}
    old_step(old_step&& other) noexcept
        : then_(std::move(other.then_)), somewhere_(other.somewhere_), due_(std::exchange(other.due_, false)) {}
    old_step& operator=(old_step&&) = delete;
    ~old_step() {
        if (!due_) return;
        for ([[maybe_unused]] auto action : move_course(move_place::step_dropped, {.somewhere = somewhere_})) try {
                (*this)();  // (go_on: asserted below)
            } catch (...) { // (out of memory: the end, let go of, lets go of the move)
            }
    }
    // Runs where it is (Asio moved it out of its queue already), marked as run first: what
    // it throws goes up, as a handler's does.
    void operator()() {
        due_ = false;
        then_();
    }

private:
    Then then_;
    bool somewhere_;
    bool due_ = true; // not run yet (a moved-from one has nothing to do)
};
static_assert(move_course(move_place::step_dropped, {.somewhere = true}).size == 1 &&
              move_course(move_place::step_dropped, {.somewhere = true}).list[0] == move_action::go_on &&
              move_course(move_place::step_dropped, {.somewhere = false}).size == 0);
} // namespace

// What a migrate call leaves to do once the routing lock is let go of: a move-only value,
// not a std::function (whose copyable closure took two allocations per migration).
struct id_impl::hand_on {
    // The old executor, to post the step to, and the call into its context that the post is
    // (the user may destroy that context meanwhile: the third review's F2), entered before
    // the kernel call. No executor once that context's shutdown has begun (nothing runs
    // there any more): the step runs here, going on to the target, or, when the end would
    // run on that context too (a failed call, a target on it), lets go of the move here,
    // while the call still holds the context.
    bound_executor::entry old{};
    std::shared_ptr<id_impl> self; // none: nothing to do (the migration was abandoned)
    error_code ec;
    how mode = how::post;
    bool called = false;      // the migrate call was made; else it was refused before: it just ends
    bool look = false;        // events may have moved with the id: the target reads them first
    bool ends_on_old = false; // the target executor runs on the old context (see migrate_now)
    std::uint64_t ticket = 0; // the target's moved_here() for the call
    bool kick_old = false;    // the event it took along is back on the old channel: read it
    std::shared_ptr<channel_impl> target{}, old_channel{};
    std::shared_ptr<data_path> data{};
    executor_type hop{}; // where the end runs after the old executor, if elsewhere
    // The migrate handler travels with the continuation, not in the id: a continuation that
    // never runs (its context destroyed first) takes it along, and with it whatever it
    // holds of the id (a connection_request, shard_pool's placement).
    void_handler handler{};
    // What id_life answered to the call (close() came meanwhile: the destroy), done once the
    // step is posted and the channels let go of: the destroy lets go of the id's channel,
    // maybe the last work of the context the step is posted to (review F4's class; the
    // fresh review of 2026-12-06, F4: it was submitted before the step was posted).
    id_life::actions after{};

    // The end of moves made together (run_together): one after the other, on their new executor.
    struct together {
        std::vector<move_end> group;
        void operator()() { finish_together(group, 0); }
    };

    void run() && {
        if (!self) return;
        if (!called) return self->end_migration(ec, mode);
        auto* id = self.get();
        const auto keep = after.size != 0 ? self : nullptr; // (for `after`: the step may end the move first)
        // Where the end runs if the old context shuts down: nowhere when the id stays there
        // (the call failed) or its target executor is on it.
        const bool nowhere = ec || ends_on_old;
        // (`target` moved into the look: a move that looks succeeded, the id keeps its owner.)
        // Handlers of the id already handed to the old executor run before the id moves on
        // (one hop when old and new executor are the same, e.g. two channels of one context).
        auto then = old_step(
            [end = move_end(std::move(self), ec, std::move(handler)), hop = std::move(hop), hop_on_old = ends_on_old,
             look_at = look ? std::move(target) : nullptr, ticket = ticket, id]() mutable {
                end_after_look(
                    look_at, ticket, hop, hop_on_old, [](move_end& e) { e.self->hold_while_moving(); },
                    [id] { return id->enter_executor(); }, end);
            },
            !nowhere);
        after_call(
            facts(),
            [&] {
                if (!data) return step(old, nowhere, then);
                // After its completions (through a copyable function: shared), from the
                // poller's strand: a call into the old context of its own.
                data->after_handed(
                    [keep = id->shared_from_this(), nowhere, then = std::make_shared<decltype(then)>(std::move(then))] {
                        auto entry = keep->enter_executor();
                        auto mine = std::move(*then); // (let go of here, while the entry holds the context)
                        step(entry, nowhere, mine);
                    });
            },
            [&] { release_channels(); });
        if (keep) keep->follow(after);
    }

    // The ids of a migrate_together, their calls made: those moved from one executor to one
    // other, without a queue pair, take one step on the old executor and one hop together,
    // and end one after the other there; any other goes on alone, after the group's step
    // is posted and its calls into the old context ended (the fourth review's R4: each
    // goes on alone, which may run a user's executor).
    static void run_together(std::vector<hand_on>& moved) {
        std::vector<move_end> group;
        std::vector<hand_on> joined; // their channels and calls, let go of once the step is posted
        std::vector<hand_on*> alone;
        std::vector<std::pair<std::shared_ptr<id_impl>, id_life::actions>> after; // once the step is posted
        executor_type old_executor, hop;
        bool hop_on_old = false; // (one old executor and one hop: one answer)
        std::shared_ptr<channel_impl> look_at;
        std::uint64_t ticket = 0; // the latest: its read covers the others
        for (auto& h : moved) {
            // (No kick of the old channel: that is a move to synchronous mode, never together.)
            const bool joins = h.self && h.called && !h.ec && !h.data && h.old.executor &&
                               (group.empty() || (h.old.executor == old_executor && h.hop == hop));
            if (!joins) {
                alone.push_back(&h);
                continue;
            }
            if (group.empty()) old_executor = h.old.executor, hop = h.hop, hop_on_old = h.ends_on_old;
            if (h.look) look_at = h.target, ticket = std::max(ticket, h.ticket); // (one target: migrate_together's)
            if (h.after.size != 0) after.emplace_back(h.self, h.after);
            group.emplace_back(std::move(h.self), error_code(), std::move(h.handler));
            joined.push_back(std::move(h));
        }
        if (!group.empty()) {
            auto* first = group.front().self.get(); // (its executor is the old one until its end)
            const bool somewhere = hop && !hop_on_old;
            auto then = old_step(
                [end = together{std::move(group)}, hop = std::move(hop), hop_on_old, look_at = std::move(look_at),
                 ticket, first]() mutable {
                    end_after_look(
                        look_at, ticket, hop, hop_on_old,
                        [](together& e) {
                            for (auto& g : e.group) g.self->hold_while_moving();
                        },
                        [first] { return first->enter_executor(); }, end);
                },
                somewhere);
            after_call(
                {.look = true}, [&] { post_on(old_executor, std::move(then)); },
                [&] {
                    for (auto& h : joined) h.release_channels();
                });
            joined.clear();
            for (auto& [id, todo] : after) id->follow(todo);
        }
        for (auto* h : alone) {
            hand_on mine = std::move(*h); // (its call ends with it)
            std::move(mine).run();
        }
    }

private:
    // Posts the step to the old executor; with none (its shutdown has begun, or is done),
    // runs it here, or, when the end has `nowhere` to run, lets go of it here (and with it
    // the move), while `old` holds the context.
    template <typename Then>
    static void step(bound_executor::entry& old, bool nowhere, Then& then) {
        switch (move_old_way_for(!!old.executor, nowhere)) {
        case move_old_way::post: post_on(old.executor, std::move(then)); break;
        case move_old_way::run_here: then(); break;
        case move_old_way::let_go: [[maybe_unused]] Then gone = std::move(then); break; // (`old` still held)
        }
    }

    // What the course says once the call is made, in its order: post_old_step, release_channels.
    template <typename PostStep, typename Release>
    static void after_call(move_facts facts, PostStep post_step, Release release) {
        for (auto action : move_course(move_place::called, facts))
            if (action == move_action::release_channels)
                release();
            else
                post_step();
    }
    static_assert(move_course(move_place::called, {}).size == 2 &&
                  move_course(move_place::called, {}).list[0] != move_course(move_place::called, {}).list[1]);

    // After the step on the old executor: the end, on `hop` (the new executor) if set, else
    // on the old one (`old()`), here when it can. When events may have moved with the id
    // (`look_at`: the kernel moves its queued ones without a wake-up, semantics F2; a request
    // not yet accepted has none, F8), the target's channel is looked at first — here when its
    // reader is idle, and read on its strand if anything waits there or the reader is busy —
    // and the end follows: what moved along is held by the id and delivered before its
    // deferred operations (channel_impl::try_look_for_move). Moves made at once (a
    // rebalance) look about once. `hop_on_old`: the new executor runs on the old context.
    // `hop` and `end` are the step's own, moved from only where they go on.
    template <typename Hold, typename Old, typename End>
    static void end_after_look(const std::shared_ptr<channel_impl>& look_at, std::uint64_t ticket, executor_type& hop,
                               bool hop_on_old, Hold hold, Old old, End& end) {
        // (One action at each of these places: asserted below.)
        if (move_course(move_place::old_step, {.look = !!look_at}).list[0] == move_action::go_to_end)
            return go_to_end(hop, end);
        if (look_at->try_look_for_move(ticket)) return go_to_end(hop, end); // read_done
        // The reader is busy, or an event waits: the read on its strand (where handlers run
        // inline, never here), then the end. Without a hop the end comes
        // back to the old executor, which no post of the move holds meanwhile (the old
        // context may have no other work: F4's class): the ids hold it until their end.
        if (!hop) hold(end);
        look_at->read_for_move_then(ticket, [hop = std::move(hop), hop_on_old, old, end = std::move(end)]() mutable {
            end_after_read(std::move(hop), hop_on_old, std::move(end), old); // read_done
        });
    }
    // On the old executor: posts the end to `hop`, else runs it here.
    template <typename End>
    static void go_to_end(executor_type& hop, End& end) {
        if (hop)
            post_on(hop, std::move(end));
        else
            end();
    }
    // On the target reader's strand: posts the end to `hop` on another context; one to the
    // old context (its executor, or `hop` on it) is a call into it (`old()`), and with none
    // (that context shuts down) the end has nowhere to run: it lets go of the move here,
    // while the entry holds the context.
    template <typename End, typename Old>
    static void end_after_read(executor_type hop, bool hop_on_old, End end, Old old) {
        if (hop && !hop_on_old) return post_on(hop, std::move(end));
        auto ex = old();
        if (move_old_way_for(!!ex.executor, true) == move_old_way::post)
            post_on(hop ? hop : ex.executor, std::move(end));
        else [[maybe_unused]]
            End gone = std::move(end); // (`ex` still held)
    }
    static_assert(move_course(move_place::old_step, {.look = true}).size == 1 &&
                  move_course(move_place::old_step, {.look = false}).size == 1 &&
                  move_course(move_place::old_step, {.look = false}).list[0] == move_action::go_to_end &&
                  move_course(move_place::read_done, {}).size == 1 &&
                  move_course(move_place::read_done, {}).list[0] == move_action::go_to_end &&
                  move_course(move_place::end, {}).list[0] == move_action::finish);

    move_facts facts() const noexcept { return {.look = look}; }
    // Once the step is posted (it holds work on the old context): the target loses the
    // owner taken for a failed move, a moved id's old channel loses it — maybe its last,
    // which stops its reader and lets go of the reader's work: posted first, the step keeps
    // the old context running until it has run (review F4: posted after, the context could
    // run out of work and return from run() first, the step then lost on a stopped context,
    // the id moving for good). And the old channel is read again if the move to synchronous
    // mode gave its event back.
    void release_channels() {
        if (kick_old) old_channel->kick();
        if (ec && target) target->remove_owner(); // taken at the start, not needed now
        if (!ec && old_channel) old_channel->remove_owner();
        target.reset();
        old_channel.reset();
    }

    // Ends the moves of `group` from `first` on, in order, on their new executor. A handler
    // run inline that throws leaves run() as Asio's do; the moves after it end from a post.
    template <typename Group>
    static void finish_together(Group& group, std::size_t first) {
        for (std::size_t i = first; i < group.size(); ++i) {
            try {
                group[i]();
            } catch (...) {
                // (On the new executor, set by its end; none if its context has shut down.)
                if (auto here = group[i].self->get_executor(); here && i + 1 < group.size())
                    post_on(here, [group = std::move(group), next = i + 1]() mutable { finish_together(group, next); });
                throw;
            }
        }
    }
};

void id_impl::hold_while_moving() {
    std::lock_guard lock(mutex_);
    if (!migration_) return;
    migration_->waited = true;
    update_busy();
}

id_impl::call_guard::call_guard(id_impl& impl) : impl_(impl) {
    std::unique_lock lock(impl_.mutex_);
    for (;;) {
        // (Raised under the lock, with the call's end: read before asking, it is the count
        // the wait below waits past.)
        const auto made = impl_.migrate_calls_.load(std::memory_order_relaxed);
        switch (impl_.life_.enter_call()) {
        case id_life::entry::go: id_ = impl_.id_; return;
        case id_life::entry::closed: return; // id() is null: nothing to call
        case id_life::entry::wait:
            lock.unlock();
            impl_.migrate_calls_.wait(made);
            lock.lock();
            break;
        }
    }
}

id_impl::call_guard::~call_guard() {
    if (!id_) return;
    std::unique_lock lock(impl_.mutex_);
    impl_.after_call(lock);
}

void id_impl::set_listening(int backlog) noexcept {
    std::lock_guard lock(mutex_);
    life_.listening();
    backlog_ = backlog > 0 ? static_cast<std::uint32_t>(backlog) : 1024;
}

void id_impl::migrate(const std::shared_ptr<channel_impl>& target, const executor_type& target_ex,
                      void_handler handler) {
    std::unique_lock lock(mutex_);
    if (begin_migration(lock, target, target_ex, handler)) migrate_step(lock, how::post);
}

void id_impl::migrate_together(std::vector<migrate_order> orders, const std::shared_ptr<channel_impl>& target,
                               const executor_type& target_ex) {
    // Started each as migrate() starts it; one with a queue pair (whose completions take
    // steps of their own), or on another channel than the first, moves alone.
    std::vector<std::shared_ptr<id_impl>> together;
    std::shared_ptr<channel_impl> reader;
    for (auto& o : orders) {
        std::unique_lock lock(o.id->mutex_);
        if (!o.id->begin_migration(lock, target, target_ex, o.handler)) continue;
        if (o.id->data_path_ || !o.id->channel_ || (reader && o.id->channel_ != reader)) {
            o.id->migrate_step(lock, how::post);
            continue;
        }
        reader = o.id->channel_;
        together.push_back(std::move(o.id));
    }
    if (together.empty()) return;
    std::vector<hand_on> moved;
    moved.reserve(together.size());
    const bool ran = reader->try_run_exclusive([&] {
        for (auto& id : together) {
            std::unique_lock lock(id->mutex_);
            if (id->ready_for_call(lock))
                moved.emplace_back(built_by{[&] { return id->migrate_now(lock, how::post); }});
        }
    });
    if (!ran) { // the old reader is busy: each from its strand, as migrate() goes on
        for (auto& id : together) {
            std::unique_lock lock(id->mutex_);
            id->migrate_step(lock, how::post);
        }
        return;
    }
    hand_on::run_together(moved); // out of the routing lock: it runs executors, maybe the user's
}

bool id_impl::begin_migration(std::unique_lock<std::mutex>& lock, const std::shared_ptr<channel_impl>& target,
                              const executor_type& target_ex, void_handler& handler) {
    error_code ec = life_.move_refusal();
    if (!ec && target && !target->try_add_owner()) // released when the migration fails
        ec = errc::channel_closed;
    if (ec || (!target && life_.synchronous())) { // refused, or synchronous already
        lock.unlock();
        complete({std::move(handler), ec, {}, {}});
        return false;
    }
    migration_.emplace(built_by{[&] {
        return migration{
            .target = target, .target_executor = target ? target_ex : executor_type(), .handler = std::move(handler)};
    }});
    life_.move_begins();
    ++moves_;
    if (data_path_) data_path_->begin_move(moves_);
    return true;
}

bool id_impl::ready_for_call(std::unique_lock<std::mutex>& lock) {
    switch (life_.ready()) {
    case id_life::readiness::call: return true;
    case id_life::readiness::wait: // the last call out goes on (after_call)
        migration_->waited = true;
        update_busy();
        break;
    case id_life::readiness::gone: break; // ended by close(), or its context's shutdown
    }
    lock.unlock();
    return false;
}

void id_impl::migrate_step(std::unique_lock<std::mutex>& lock, how mode) {
    if (!ready_for_call(lock)) return;
    // A synchronous id has no channel of ours: the target's reader makes the call.
    auto reader = channel_ ? channel_ : migration_->target;
    std::optional<hand_on> next; // (built inside the routing call, run after it)
    if (!reader->try_run_exclusive([&] { next.emplace(built_by{[&] { return migrate_now(lock, mode); }}); }))
        return migrate_later(lock, mode);
    std::move(*next).run(); // out of the routing lock: it runs executors, maybe the user's
}

void id_impl::migrate_on_reader() {
    std::unique_lock lock(mutex_);
    migrate_step(lock, how::dispatch); // on the reader's strand: runs it now, or waits for a call
}

void id_impl::migrate_later(std::unique_lock<std::mutex>& lock, how mode) {
    auto reader = channel_ ? channel_ : migration_->target;
    lock.unlock();
    if (!reader->run_on_reader([self = shared_from_this()] { self->migrate_on_reader(); }))
        end_migration(errc::channel_closed, mode); // the old context is gone: nothing moved
}

void id_impl::end_migration(error_code ec, how mode) {
    bound_executor::entry old; // the id's executor, and the call into its context a post there is
    std::shared_ptr<channel_impl> target;
    std::optional<move_end> end; // (only when the move has an end to post)
    id_life::actions todo;
    {
        std::unique_lock lock(mutex_);
        // No end to post if it ended already: by whoever settled it first (close() asked for
        // this while the old reader, ready meanwhile, found the id closed and ended it), or by
        // its context's shutdown.
        todo = life_.settle();
        if (todo.size != 0 && todo.list[0] == id_life::action::post_end) {
            target = migration_->target;
            end.emplace(shared_from_this(), ec, std::move(migration_->handler));
            old = executor_.enter();
        }
    }
    // Here on the reader's strand (dispatch) when this thread runs the id's context too;
    // else posted there, before anything is let go of: the target's owner, or the id (whose
    // destroy lets go of its channel, maybe the old context's last work) — as a move's step
    // is (review F4). Neither when that context shuts down: the end, with nowhere to run,
    // lets go of the move as it goes, here, while `old` holds the context.
    const bool here = end && mode == how::dispatch && old.executor && !old.call;
    for (auto action : todo) {
        if (action == id_life::action::post_end) {
            if (old.executor && !here) post_on(old.executor, std::move(*end));
            if (target) target->remove_owner(); // taken at the start, not needed now
        } else {
            follow({{action}, 1}); // closed: the id goes now, whenever the end runs
        }
    }
    if (here) (*end)();
}

void id_impl::abandon_migration() noexcept {
    // The context the id stays on, held while what the move held goes (handlers bound to it)
    // and its queue pair is told.
    bound_executor::entry stays;
    std::optional<migration> gone; // (held events, deferred operations: let go of out of the lock)
    std::shared_ptr<data_path> held;
    std::uint64_t move = 0;
    {
        std::unique_lock lock(mutex_);
        if (!life_.ends_move()) return; // (its end's, which alone ends a settled move)
        take_migration(gone);
        update_busy();
        // Its queue pair held its completions while the id moved: handed over again where
        // the id stays (the fifth review's F5-8: held for good while that context lived on),
        // not once that context shuts down (its context_gone aborts them). Told out of the
        // lock, as attach() tells it (review F6): an end told after a newer move began is
        // stale, and the queue pair ignores it.
        stays = executor_.enter();
        if (stays.executor) held = data_path_;
        move = moves_;
        release_if_idle(lock); // close() came while the id moved
    }
    if (held) try {
            held->end_move(stays.executor, move);
        } catch (...) { // (out of memory: the queue pair may keep what it holds, said in internals)
        }
}

id_impl::hand_on id_impl::migrate_now(std::unique_lock<std::mutex>& lock, how mode) {
    // (Asked ready() in this hold of the lock: the move is begun, nothing in flight.)
    auto target = migration_->target;
    error_code ec = life_.call_refusal(!target, !migration_->held.empty() || !events_.empty() ||
                                                    !migration_->deferred.empty() || machine_.busy());
    if (ec) {
        lock.unlock();
        return {.self = shared_from_this(), .ec = ec, .mode = mode};
    }
    // The call into the old context the move's step is, entered before the kernel call
    // (move_course at `ready`): the context's shutdown waits for it (a short non-blocking
    // call), so the step finds the context alive after it, or shutting down and waiting
    // (recheck). Shut down already: move_entry_way.
    static_assert(move_course(move_place::ready, {}).list[0] == move_action::enter_old &&
                  move_course(move_place::ready, {}).list[1] == move_action::migrate_call);
    // Whether the target executor runs on the id's context (or both are gone): once that
    // context shuts down, the move's end has nowhere to run (the fourth review's R1). Asked
    // with the entry: the context lives then (its shutdown, begun, waits for the call).
    bool ends_on_old = !target;
    auto old = target ? executor_.enter(migration_->target_executor, ends_on_old) : executor_.enter();
    switch (move_entry_way(!!old.executor, !!old.call, left_context_, ends_on_old)) {
    case move_entry::make_call: break;
    case move_entry::left: lock.unlock(); return {};
    case move_entry::refused:
        lock.unlock();
        return {.self = shared_from_this(), .ec = boost::asio::error::operation_aborted, .mode = mode};
    }
    rdma_cm_id* id = id_;
    auto old_channel = channel_;
    bool kick_old = false;
    life_.call_begins();
    lock.unlock();

    // The target's reader must not read meanwhile either (semantics R8): the kernel moves
    // the id before librdmacm points id->channel at the target, and an event of the id
    // read there in between has librdmacm's follow-up command (a query, the RTU answering
    // a CONNECT_RESPONSE) written to the old fd: EINVAL, the event turned into an error.
    if (target) target->pause_reads();
    if (rdma_migrate_id(id, target ? target->native() : nullptr) != 0) ec = RDMACM_CALL_ERROR("rdma_migrate_id");
    if (target) target->resume_reads();
    if (!ec && !target && channel_impl::has_queued_event(id->channel)) {
        // An event moved to the private channel with the id: back where it was, with it.
        if (rdma_migrate_id(id, old_channel->native()) == 0) {
            ec = errc::event_pending;
            kick_old = true;
        } // else synchronous after all: its blocking calls refuse while the event waits
    }
    lock.lock();
    const auto todo = life_.call_made(!ec, !target);
    migrate_calls_.fetch_add(1, std::memory_order_relaxed); // (under the lock: see call_guard)
    executor_.recheck(old);
    if (!ec) channel_ = target; // with the owner taken at the start
    const bool look = target && !ec && !pending_request_;
    const std::uint64_t ticket = look ? target->moved_here() : 0;
    executor_type hop;
    if (!ec && target && migration_->target_executor != old.executor) hop = migration_->target_executor;
    auto data = data_path_;
    auto handler = std::move(migration_->handler);
    lock.unlock();
    migrate_calls_.notify_all();
    // (Until finish_migration, the id's events are held, wherever they are routed: what
    // follows needs no lock.) Returned as built, not named: no move of it on the way out.
    return {.old = std::move(old),
            .self = shared_from_this(),
            .ec = ec,
            .called = true,
            .look = look,
            .ends_on_old = ends_on_old,
            .ticket = ticket,
            .kick_old = kick_old,
            .target = std::move(target),
            .old_channel = std::move(old_channel),
            .data = std::move(data),
            .hop = std::move(hop),
            .handler = std::move(handler),
            .after = todo};
}

// On the new executor (the old one if the migration failed), never inside an initiating
// call. Until it ends, newer events and operations queue behind what it hands over.
void id_impl::finish_migration(error_code ec, void_handler& handler) {
    std::unique_lock lock(mutex_);
    const auto ex = ec || !migration_->target ? executor_.get() : executor_.set(migration_->target_executor);
    // Bound to a context that has shut down, the id has no context_gone to come; to a live
    // one, async_close's handlers kept meanwhile (destroyed() found no context) run there.
    bool closed = false;
    if (!ec) {
        left_context_ = !ex;
        closed = ex && life_.was_destroyed();
    }
    std::shared_ptr<data_path> ended; // whose end_move ran
    // A completion posted (a hand-over counted as a call into the id's context, as from a
    // thread not known to run it: a user's executor type): what follows is posted too, the
    // migrate handler included — run inline, it would come before (the fourth review's R3).
    bool posted = false;
    for (;;) {
        if (!migration_->held.empty()) { // events, in order, as the reader would have delivered them
            auto held = std::exchange(migration_->held, {});
            lock.unlock();
            std::size_t i = 0;
            try {
                for (; i < held.size(); ++i)
                    if (deliver(held[i], false, posted)) posted = true;
            } catch (...) {
                // A handler run inline threw (out of run(), as Asio's do): the rest, and the
                // end of the move, go on from a post — the id is not left moving for good.
                lock.lock();
                migration_->held.insert(migration_->held.begin(),
                                        std::make_move_iterator(held.begin() + static_cast<std::ptrdiff_t>(i) + 1),
                                        std::make_move_iterator(held.end()));
                lock.unlock();
                // (No executor: its context shut down; the end, with nowhere to run, lets go of the move.)
                move_end rest(shared_from_this(), ec, std::move(handler));
                if (ex) post_on(ex, std::move(rest));
                throw;
            }
            lock.lock();
        } else if (!migration_->deferred.empty()) { // one at a time: a cancel finds each, or its canceller
            auto d = std::move(migration_->deferred.front());
            migration_->deferred.erase(migration_->deferred.begin());
            start_now(lock, d.kind, std::move(d.handler), d.call);
            lock.lock();
        } else if (data_path_ && data_path_ != ended) { // the queue pair's completions: while still moving
            // (A queue pair made meanwhile began a move of its own: it ends here too. One the
            // destroy took away after a close() is none: closing it aborted all it held.)
            ended = data_path_;
            const auto move = moves_;
            lock.unlock();
            ended->end_move(ex, move);
            lock.lock();
        } else {
            break;
        }
    }
    // A move that waited for a call held the id's work (update_busy): let go of once its
    // handler is handed over. Any other leaves the id's work as it was.
    const bool waited = migration_->waited;
    migration_.reset();
    (void)life_.ends_move(); // (settled: its call was made or refused)
    release_if_idle(lock);   // close() came while the id moved
    const how mode = posted ? how::post : how::dispatch;
    if (closed) hand_over_close_waiters();
    if (waited)
        complete({std::move(handler), ec, {}, {}}, mode);
    else
        complete(ex, {std::move(handler), ec, {}, {}}, mode);
}

} // namespace rdmacm::detail
