#pragma once
/// @file
/// Placement policies: which shard of a `shard_pool` a new connection goes to.
#include "rdmacm/connection_request.hpp"

#include <cstddef>
#include <functional>
#include <span>

namespace rdmacm {

/// Picks the shard for a connection request, given how many connections each shard had
/// when it was asked (`connections.size()` is the shard count). Called on the thread that
/// accepted the request, with no lock of the pool held: it may call into the pool. Requests
/// accepted on several threads at once call it at once: a policy with state keeps it
/// thread-safe (round_robin's counter is atomic). An index out of range rejects the request
/// (errc::no_such_shard).
using placement_policy =
    std::function<std::size_t(std::span<const std::size_t> connections, const connection_request& request)>;

/// Shard 0, 1, 2, ... in turn (the default).
placement_policy round_robin();
/// The shard with the fewest connections (the lowest index among equals).
placement_policy least_connections();

} // namespace rdmacm
