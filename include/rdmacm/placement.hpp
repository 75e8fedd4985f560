#pragma once
/// @file
/// Placement policies: which shard of a `shard_pool` a new connection goes to.
#include "rdmacm/connection_request.hpp"

#include <cstddef>
#include <functional>
#include <span>

namespace rdmacm {

/// Picks the shard for a connection request, given how many connections each shard has now
/// (`connections.size()` is the shard count). Called under the pool's lock, one request at a
/// time, on the thread that accepted the request: it must not call into the pool. An index
/// out of range rejects the request (errc::no_such_shard).
using placement_policy =
    std::function<std::size_t(std::span<const std::size_t> connections, const connection_request& request)>;

/// Shard 0, 1, 2, ... in turn (the default).
placement_policy round_robin();
/// The shard with the fewest connections (the lowest index among equals).
placement_policy least_connections();

} // namespace rdmacm
