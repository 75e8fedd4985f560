#pragma once
/// @file
/// How a `shard_pool`'s stop ends its connections.

namespace rdmacm {

/// How `basic_shard_pool::stop` ends the connections (one type for every executor type).
enum class pool_stop_mode {
    close, ///< close every connection: its operations complete with operation_aborted
    drain  ///< let every placed connection end on its own (one still being placed is closed)
};

} // namespace rdmacm
