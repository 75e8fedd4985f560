#pragma once
// A move's course from its migrate call on, as plain code without I/O: what is done where,
// and in which order (move_course); where a step meant for the context the move leaves goes
// once that context shuts down (move_entry_way, move_old_way); and when the target channel
// must be read for the events the kernel moved along (move_reads). src/cm/migrate.cpp and
// src/cm/channel_impl.hpp do what these say; tests/move_explorer_test.cpp runs the same code
// against every interleaving of a model of the contexts (one of them shut down at any
// point), channels and kernel queues around two moves.
#include "common/action_list.hpp"

#include <array>
#include <atomic>
#include <cstdint>

namespace rdmacm::detail {

// Where a move is.
enum class move_place : std::uint8_t {
    ready,        // no librdmacm call on the id in flight, the readers kept out: the call is next
    called,       // the migrate call returned (on the thread that made it, no lock held)
    old_step,     // on the old executor, after every handler of the id posted there before
    read_done,    // the target channel was read for the move (here, or on its reader's strand)
    end,          // on the executor the move ends on (the new one; the old one if it failed)
    dropped,      // its end let go of without having run (its context shut down first)
    step_dropped, // its old step let go of without having run (the old context shut down
                  // with it queued: the shutdown may begin after the move's recheck)
};

enum class move_action : std::uint8_t {
    enter_old,        // enter the old context: a counted call that its shutdown waits for
                      // (move_entry_way says whether the move goes on)
    migrate_call,     // rdma_migrate_id: the kernel moves the id, and its queued events
    post_old_step,    // post old_step to the old executor (work held there until it runs)
    release_channels, // let go of what the move held of its channels: maybe the last owner
                      // of the old one, whose reader held the old context's last work
    read_target,      // read the target channel unless covered (move_reads), then read_done
    go_to_end,        // post end to the new executor; on the old one, run it here if here
    finish,           // held events, then deferred operations, then the handler
    abandon,          // let go of the move: held events, deferred operations, the handler
    go_on,            // run the old step here (from its destructor), on to the end elsewhere
};

struct move_facts {
    bool look = false;      // the call succeeded and events may have moved along (semantics F2, F8)
    bool somewhere = false; // the move ends on another context than the one it leaves
};

// The actions to take at `place`, in order.
using move_actions = action_list<move_action, 2>;

constexpr move_actions move_course(move_place place, move_facts facts) noexcept {
    switch (place) {
    case move_place::ready:
        // The context first, then the kernel: the context's shutdown waits for the entered
        // call, so after the kernel call the move finds its context alive, or shutting down
        // and waiting for it — never gone. Entered after, the kernel may have moved the id
        // by the time the move finds its context gone and is refused: the library then
        // names the old channel, the kernel the new one (the fourth review's R1).
        return {{move_action::enter_old, move_action::migrate_call}, 2};
    case move_place::called:
        // The step first: it holds the old context's work until it has run. Let go of the
        // channels first, and a move that was the old channel's last owner lets that
        // context run out of work and return from run() before the step is posted: the
        // step lost, the move never ends (review F4).
        return {{move_action::post_old_step, move_action::release_channels}, 2};
    case move_place::old_step:
        // The read, then the end: never both at once — an end posted beside a read that
        // waits for a busy reader overtakes the event the read would find (review F5).
        if (facts.look) return {{move_action::read_target}, 1};
        return {{move_action::go_to_end}, 1};
    case move_place::read_done: return {{move_action::go_to_end}, 1};
    case move_place::end: return {{move_action::finish}, 1};
    case move_place::dropped:
        // The end owns the move: let go of, it takes the move along, never leaving the id
        // moving for good with its handler gone (its operations deferred forever).
        return {{move_action::abandon}, 1};
    case move_place::step_dropped:
        // A move with somewhere else to end goes on there: the old context's shutdown only
        // took the step that was to run there first (the fresh review of 2026-12-05, M1:
        // posted after the shutdown began, as the move's recheck came before it). One with
        // nowhere else lets its end go with the step, and the end the move (`dropped`).
        if (facts.somewhere) return {{move_action::go_on}, 1};
        return {};
    }
    return {};
}

// What entering the old context (move_action::enter_old) lets a move do: the entry has its
// executor (the context lives), or a counted call only (its shutdown began and waits for
// it), or neither (the shutdown is done).
enum class move_entry : std::uint8_t {
    make_call, // the kernel call goes on
    left,      // no call: the context's shutdown, still to tell the id, abandons the move
    refused,   // no call: the move ends at once, refused (operation_aborted)
};
constexpr move_entry move_entry_way(bool executor, bool counted, bool left_context, bool ends_on_old) noexcept {
    if (executor || counted) return move_entry::make_call;
    // Shut down. Before the id was told (left_context): its context_gone, to come, takes
    // the move. After: the id left its context before the move began (the user moves an
    // id of a context gone): a move away still goes on; one with nowhere else to end cannot.
    if (!left_context) return move_entry::left;
    return ends_on_old ? move_entry::refused : move_entry::make_call;
}

// Where a step meant for the old context goes (the old step after the call; the end coming
// back to the old context after a read on the target's strand), given the entry's executor
// (none once the context's shutdown began) and whether the end has `nowhere` else to run
// (the call failed, or the new executor is on the old context).
enum class move_old_way : std::uint8_t {
    post,     // to the old executor, as a counted call
    run_here, // the context shuts down: on, to where the move ends, from this thread
    let_go,   // the context shuts down and the move ends nowhere else: dropped (its end
              // lets go of the move) while the entry still holds the context
};
constexpr move_old_way move_old_way_for(bool executor, bool nowhere) noexcept {
    if (executor) return move_old_way::post;
    // Run here with nowhere else to end, the end would run on the context being destroyed
    // and bind the id to it (the fourth review's R2).
    return nowhere ? move_old_way::let_go : move_old_way::run_here;
}

// A channel's bookkeeping of the reads it owes to the moves into it. Each move takes a
// ticket once its call is made; each read of the channel notes, as it begins, the tickets
// given out by then, and once it drained the channel to EAGAIN, they are covered: a move
// whose ticket is covered has its events read already and needs no read of its own, so
// moves made at once read about once. Reads are made one at a time (the caller's hold
// on the channel's route), begun() and drained() and covered() under it.
class move_reads {
public:
    // A move's call is made (its events, if any, are in the channel's queue now).
    std::uint64_t ticket() noexcept { return given_.fetch_add(1, std::memory_order_acq_rel) + 1; }
    // A read begins: what it will cover once it drains the channel.
    std::uint64_t begun() const noexcept { return given_.load(std::memory_order_acquire); }
    void drained(std::uint64_t begun_at) noexcept { covered_ = begun_at; }
    bool covered(std::uint64_t ticket) const noexcept { return covered_ >= ticket; }

private:
    std::atomic<std::uint64_t> given_{0};
    std::uint64_t covered_ = 0;
};

} // namespace rdmacm::detail
