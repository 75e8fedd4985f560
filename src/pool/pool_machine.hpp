#pragma once
// A pooled move's course and a pool's stop, as plain code without I/O: what keeps each shard
// running while a move or a rebalance is under way, what is done where,
// and in which order stop() lets go of the shards. src/pool/shard_pool.cpp does what these say;
// tests/pool_explorer_test.cpp runs the same code against every interleaving of a model of
// the shards (each an io_context whose run() returns once it has no work), a stop and the
// operations beside it.
#include "common/action_list.hpp"

#include <array>
#include <cstdint>

namespace rdmacm::detail {

// Where a pooled move is.
enum class pool_move_place : std::uint8_t {
    ordered,      // under the pool's lock: the connection is to move, the stop not yet looked at
    migrated,     // the id's move ended (its migrate handler runs on the new shard)
    failed,       // the id's move failed (its migrate handler runs on the old shard: the id stayed)
    at_home,      // on the connection's strand, running on the new shard
    handler_done, // the move's handler has run
};

enum class pool_move_action : std::uint8_t {
    refuse,        // pool_stopped, to the handler's executor or the system executor: no shard
    hold_shards,   // work on the old and the new shard, taken with the stop's check under
                   // the pool's lock (holding_executor): neither returns from run() before
                   // the move is done with it, whenever stop() lets go of them
    migrate,       // the id's move to the new shard's channel (no lock held)
    follow_strand, // the strand's home is the new shard; then a hop onto the strand there
                   // (through the old shard when an invoker of it is queued there), holding
                   // the new shard's work until it has run
    release_old,   // the hold on the old shard let go of
    end_move,      // under the pool's lock: the move ended; a move waiting behind it starts
    post_handler,  // the handler to the new shard (held): a user's; a rebalance's count is
                   // called here instead, and its last posts the report to the rebalance's shard
    release_new,   // the hold on the new shard let go of
};

struct pool_move_facts {
    bool stopping = false; // read under the pool's lock, in the same hold as the holds are taken
};

using pool_move_actions = action_list<pool_move_action, 3>;

constexpr pool_move_actions pool_move_course(pool_move_place place, pool_move_facts facts) noexcept {
    using enum pool_move_action;
    switch (place) {
    case pool_move_place::ordered:
        // Held before anything is posted, in the lock's hold that saw no stop: a stop
        // after it lets go of the shards, which run until the move is done with them.
        // Posted to a shard captured without a hold, a continuation lands on a shard that
        // stop() let run out of work: the move's handler, a rebalance's count, never run,
        // and its report's shard never returns (review F3).
        if (facts.stopping) return {{refuse}, 1};
        return {{hold_shards, migrate}, 2};
    case pool_move_place::migrated:
        // The old shard's hold goes once the hop is posted: a hop queued behind the
        // strand's invoker on the old shard is that invoker's work there.
        return {{follow_strand, release_old}, 2};
    case pool_move_place::failed: return {{end_move, post_handler, release_old}, 3};
    case pool_move_place::at_home: return {{end_move, post_handler}, 2};
    case pool_move_place::handler_done: return {{release_new}, 1};
    }
    return {};
}

// A rebalance's start, under the pool's lock: refused once stopping; else the shard its
// report goes to is held until the report has run — its moves may each be refused later
// (the stop began meanwhile), their counts run on the system executor, and the last posts
// the report there.
constexpr pool_move_actions pool_rebalance_start(pool_move_facts facts) noexcept {
    if (facts.stopping) return {{pool_move_action::refuse}, 1};
    return {{pool_move_action::hold_shards}, 1};
}

// stop(), in order.
enum class pool_stop_step : std::uint8_t {
    refuse_new,       // under the pool's lock: stopping (every operation ordered from here is
                      // refused), the waiting placements and moves taken
    complete_waiting, // those, pool_stopped, on the system executor
    close_ids,        // the listeners, and for pool_stop_mode::close every connection, closed
    release_shards,   // under the pool's lock: each shard's guard and channel let go of; it
                      // runs until the holds taken before refuse_new are let go of
    join,             // wait for every shard to return from run() (not on a shard's thread)
};

// The stop's steps, in the order stop() takes them. Let go of the shards before refusing
// new operations, and an operation ordered between takes work on a shard that may have
// returned from run() already: its continuations never run.
constexpr std::array<pool_stop_step, 5> pool_stop_course{pool_stop_step::refuse_new, pool_stop_step::complete_waiting,
                                                         pool_stop_step::close_ids, pool_stop_step::release_shards,
                                                         pool_stop_step::join};

} // namespace rdmacm::detail
