#pragma once
// An id's life as plain code without I/O: when a librdmacm call may be made on the id
// (never beside rdma_migrate_id, never once the id is closed), when a move makes its migrate
// call (once no other call is in flight: the last one out moves it on), what a close does to
// a move under way, and who destroys the id (whoever ends the last of its calls and moves
// after close(), exactly once). src/cm/id_impl.cpp, src/cm/migrate.cpp and src/cm/sync_mode.cpp ask it
// under the id's mutex and do what it answers, in its order, after the mutex;
// tests/id_life_explorer_test.cpp runs the same code against every interleaving of calls, a
// move, a close and a context's shutdown.
#include "common/action_list.hpp"
#include "rdmacm/error.hpp"

#include <boost/asio/error.hpp>

#include <cstdint>

namespace rdmacm::detail {

class id_life {
public:
    // Where the id's move is (one at a time).
    enum class move_phase : std::uint8_t {
        none,
        begun,   // marked moving (events held, operations deferred): its call is still to make
        waiting, // for the calls in flight: the last one out moves it on
        calling, // rdma_migrate_id is being made (no lock held): no other call may start
        settled, // the call was made or refused, or the move ended without it: its end
                 // (finish_migration, or the end let go of) is all that is left
    };
    enum class action : std::uint8_t {
        move_on,        // the waiting move goes on to its call (migrate_step)
        settle_move,    // the move ends without its call, aborted (end_migration, which settles it)
        post_end,       // post the settled move's end (finish_migration) to its executor
        submit_destroy, // the id goes: its destroy to the destroyer
    };
    // The end is posted before the destroy is submitted: the destroy lets go of the id's
    // channel, maybe the last work of the context the end is posted to (review F4's class).
    using actions = action_list<action, 2>;

    enum class entry : std::uint8_t {
        go,     // counted: make the call, then leave_call()
        wait,   // rdma_migrate_id is being made: wait for its end (call_made()), then ask again
        closed, // the id is closed: nothing to call
    };
    enum class readiness : std::uint8_t {
        call, // make the migrate call now (call_begins())
        wait, // calls are in flight: the last one out moves it on
        gone, // the move ended meanwhile (a close, a context's shutdown): nothing to do
    };

    // A call_guard's librdmacm call on the id, made outside the lock.
    [[nodiscard]] entry enter_call() noexcept {
        if (closed_) return entry::closed;
        if (phase_ == move_phase::calling) return entry::wait;
        ++calls_;
        return entry::go;
    }
    // A call admitted already, in the same hold of the lock: an operation's (id_machine
    // started it: the id is open, and operations wait while it moves) or a blocking call of
    // synchronous mode (`blocking_sync`: sync_refusal let it, so no move is under way).
    void enter_admitted_call(bool blocking_sync = false) noexcept {
        ++calls_;
        if (blocking_sync) sync_call_ = true;
    }
    actions leave_call(bool blocking_sync = false) noexcept {
        --calls_;
        if (blocking_sync) sync_call_ = false;
        if (calls_ == 0 && phase_ == move_phase::waiting) {
            phase_ = move_phase::begun;
            return {{action::move_on}, 1};
        }
        return destroy_if_due();
    }

    // Why a move cannot begin (none: it may); a move to synchronous mode of an id in it
    // already completes at once (synchronous()).
    error_code move_refusal() const noexcept {
        if (closed_) return errc::not_open;
        if (phase_ != move_phase::none || sync_call_) return errc::operation_in_progress;
        if (listening_) return errc::listener_cannot_migrate;
        return {};
    }
    void move_begins() noexcept { phase_ = move_phase::begun; }
    // Whether the move may make its call now (asked again by whoever moves it on).
    readiness ready() noexcept {
        if (phase_ != move_phase::begun) return readiness::gone;
        if (calls_ != 0) {
            phase_ = move_phase::waiting;
            return readiness::wait;
        }
        return readiness::call;
    }
    // Why the ready call is refused after all (none: make it); `events_or_operations`: the
    // id has an event or operation queued or expected (a move to synchronous mode would
    // have librdmacm's next blocking call take that event for its own).
    error_code call_refusal(bool to_synchronous, bool events_or_operations) const noexcept {
        if (closed_) return boost::asio::error::operation_aborted;
        if (listening_) return errc::listener_cannot_migrate; // listen() came meanwhile
        if (to_synchronous && events_or_operations) return errc::event_pending;
        return {};
    }
    void call_begins() noexcept { phase_ = move_phase::calling; }
    // The migrate call returned: `moved` the id to its target (`to_synchronous`: none).
    actions call_made(bool moved, bool to_synchronous) noexcept {
        phase_ = move_phase::settled;
        if (moved) synchronous_ = to_synchronous;
        return destroy_if_due();
    }
    // The move ends without its call (refused, or its old reader gone): unless it ended
    // already, or its call is being made (which settles it). Ended already, the destroy may
    // be due all the same: a close asked for this end (settle_move), and the context's
    // shutdown took the move before it came (found by the explorer: the id never destroyed).
    actions settle() noexcept {
        if (phase_ != move_phase::begun && phase_ != move_phase::waiting) return destroy_if_due();
        phase_ = move_phase::settled;
        actions todo{{action::post_end}, 1};
        if (destroy_if_due().size != 0) todo.list[todo.size++] = action::submit_destroy;
        return todo;
    }
    // The move's end ran, or was let go of: the id no longer moves. False if there was no
    // settled move to end (none, or one still to settle).
    bool ends_move() noexcept {
        if (phase_ != move_phase::settled) return false;
        phase_ = move_phase::none;
        return true;
    }
    // The id's context shut down: a move still to make its call ends here (its next step
    // would run on that context), without an end. Whether there was one.
    bool context_gone() noexcept {
        if (phase_ != move_phase::begun && phase_ != move_phase::waiting) return false;
        phase_ = move_phase::none;
        return true;
    }

    // Nothing starts any more; a move still to make its call ends (aborted: settle_move,
    // whose settle() then submits the destroy if due); else the id goes once its calls and
    // its move's call are out. Empty the second time.
    actions close() noexcept {
        if (closed_) return {};
        closed_ = true;
        if (phase_ == move_phase::begun || phase_ == move_phase::waiting) return {{action::settle_move}, 1};
        return destroy_if_due();
    }
    // After an action list's own: the destroy, once due (the end of a move, a refusal).
    actions destroy_if_due() noexcept {
        if (!closed_ || moving() || calls_ != 0 || destroy_ != destroy_phase::none) return {};
        destroy_ = destroy_phase::submitted;
        return {{action::submit_destroy}, 1};
    }
    void destroyed() noexcept { destroy_ = destroy_phase::done; }

    void listening() noexcept { listening_ = true; }

    // Why a blocking call of synchronous mode cannot be made now (none: it may).
    error_code sync_refusal() const noexcept {
        if (closed_) return errc::not_open;
        if (!synchronous_) return errc::not_synchronous;
        if (sync_call_ || phase_ != move_phase::none) return errc::operation_in_progress;
        return {};
    }
    // Why an asynchronous operation cannot start (none: ask id_machine).
    error_code async_refusal() const noexcept {
        return synchronous_ && !closed_ ? error_code(errc::synchronous_mode) : error_code();
    }

    bool closed() const noexcept { return closed_; }
    bool synchronous() const noexcept { return synchronous_; }
    bool was_destroyed() const noexcept { return destroy_ == destroy_phase::done; }
    // A move is under way that has not settled: its call still to make, or being made.
    bool moving() const noexcept {
        return phase_ == move_phase::begun || phase_ == move_phase::waiting || phase_ == move_phase::calling;
    }
    int calls() const noexcept { return calls_; }

protected: // (tests/id_life_explorer_test.cpp puts defects back in derived machines)
    enum class destroy_phase : std::uint8_t { none, submitted, done };

    int calls_ = 0;          // librdmacm calls on the id being made outside the lock
    bool sync_call_ = false; // one of them is a blocking call of synchronous mode
    move_phase phase_ = move_phase::none;
    destroy_phase destroy_ = destroy_phase::none;
    bool closed_ = false;
    bool listening_ = false;   // never moves (semantics R6)
    bool synchronous_ = false; // on librdmacm's private channel
};

} // namespace rdmacm::detail
