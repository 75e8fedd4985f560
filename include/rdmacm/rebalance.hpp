#pragma once
/// @file
/// Rebalancing plans: which connections of a `shard_pool` to move where. Plain functions of a
/// snapshot, no I/O: `shard_pool::async_rebalance` takes a snapshot, asks a plan, and carries
/// out its moves.
#include "rdmacm/error.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace rdmacm {

/// One connection in a snapshot: its key (`pooled_connection::key()`), shard and load
/// (`pooled_connection::set_load`, 0 unless set).
struct connection_load {
    std::uint64_t key = 0;
    std::size_t shard = 0;
    double load = 0;
};

/// Move connection `key` from shard `from` to shard `to`.
struct planned_move {
    std::uint64_t key = 0;
    std::size_t from = 0, to = 0;
    friend bool operator==(const planned_move&, const planned_move&) = default;
};

/// Given a snapshot of every connection and the shard count, the moves to make.
using rebalance_plan =
    std::function<std::vector<planned_move>(std::span<const connection_load> connections, std::size_t shards)>;

/// Evens out connection counts (afterwards they differ by at most one) with the fewest moves.
rebalance_plan even_count();
/// Evens out the sum of loads: moves a connection from the most to the least loaded shard as
/// long as that narrows the gap between them by more than `min_gain` (a fraction of the mean
/// shard load), so equal-ish shards are left alone.
rebalance_plan even_load(double min_gain = 0.05);

/// What a rebalance did: connections per shard before and after, the moves made, and the
/// moves that failed with why (the connection closed meanwhile: errc::not_open).
struct rebalance_report {
    std::vector<std::size_t> before, after;
    std::vector<planned_move> moved;
    std::vector<std::pair<planned_move, error_code>> failed;
};

} // namespace rdmacm
