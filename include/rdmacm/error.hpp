#pragma once
/// @file
/// Errors of asio-rdmacm.
///
/// Three kinds of error_code reach a completion handler:
/// - a librdmacm or libibverbs call that failed: `boost::system::system_category()` with the
///   call's errno; `ec.location().function_name()` (and so `ec.what()`) names the call, e.g.
///   "rdma_resolve_addr";
/// - a CM event that reports a failure (ADDR_ERROR, REJECTED, ...) or a misuse of the
///   library: `rdmacm::error_category()` with an `rdmacm::errc`. The event's raw status
///   (e.g. the reject reason) stays in the `cm_event` the operation completes with;
/// - a data operation whose work completion failed: `work_completion_category()`.
///
/// `rdmacm::condition` matches across the three: connection lost, refused, timed out, misuse.
#include <boost/system/error_code.hpp>

namespace rdmacm {

using boost::system::error_code;

enum class errc {
    // CM events that end an operation in failure.
    address_error = 1, ///< RDMA_CM_EVENT_ADDR_ERROR: address resolution failed
    route_error,       ///< RDMA_CM_EVENT_ROUTE_ERROR: route resolution failed
    connect_error,     ///< RDMA_CM_EVENT_CONNECT_ERROR: error while establishing the connection
    unreachable,       ///< RDMA_CM_EVENT_UNREACHABLE: the peer did not answer
    rejected,          ///< RDMA_CM_EVENT_REJECTED: the peer (or its CM) rejected the request
    device_removed,    ///< RDMA_CM_EVENT_DEVICE_REMOVAL: the RDMA device went away
    address_changed,   ///< RDMA_CM_EVENT_ADDR_CHANGE: the id's address changed under it
    disconnected,      ///< RDMA_CM_EVENT_DISCONNECTED arrived while connecting or accepting
    multicast_error,   ///< RDMA_CM_EVENT_MULTICAST_ERROR
    unexpected_event,  ///< an event the operation cannot have caused
    // Misuse, refused before any librdmacm call.
    operation_in_progress,        ///< an operation of the same kind is already outstanding on the id
    not_open,                     ///< the object is closed or moved-from
    already_listening,            ///< listen() on a listening id
    address_family_not_supported, ///< neither IPv4 nor IPv6 (nor AF_IB)
    private_data_too_long,        ///< more private data than the transport can carry
    channel_closed,               ///< the event channel (or its execution context) is gone
    listener_cannot_migrate,      ///< a listening id cannot migrate: migrate before listen
    synchronous_mode,             ///< an asynchronous operation on an id in synchronous mode
    not_synchronous,              ///< a blocking call on an id not in synchronous mode
    event_pending,                ///< an event of the id is queued or expected: read it first
    buffer_not_registered,        ///< a data operation's buffer is not inside its memory region
    remote_buffer_too_small,      ///< more data than the peer's remote buffer holds
    no_such_shard,                ///< a shard index (given, or from a placement) out of range
    pool_stopped,                 ///< the shard pool is stopping or stopped
    too_many_buffers,             ///< more buffers in one data operation than the queue pair takes
    no_device,                    ///< a queue pair or a connect on an id with no RDMA device yet (resolve first)
    // (The misuse group ends here: condition::misuse matches operation_in_progress to no_device.)
    protocol_error, ///< the peer does not speak the stream protocol (or another version of it)
};

/// The category of `errc` values ("asio-rdmacm").
const boost::system::error_category& error_category() noexcept;

/// The category of work completions that failed ("ibv_wc_status"): the value is the
/// completion's `ibv_wc_status` (e.g. IBV_WC_REM_ACCESS_ERR for a bad rkey,
/// IBV_WC_WR_FLUSH_ERR for work flushed from a queue pair in error: the connection broke),
/// the message libibverbs' `ibv_wc_status_str`.
const boost::system::error_category& work_completion_category() noexcept;

inline error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }

/// The questions a user asks of any error, whichever category it came in (as Beast's
/// `condition`): `if (ec == rdmacm::condition::connection_lost)`. An error_code may match
/// more than one.
enum class condition {
    /// The connection is gone: the peer disconnected or its device went away while an
    /// operation waited (errc::disconnected, errc::device_removed), work flushed from a
    /// queue pair in error (IBV_WC_WR_FLUSH_ERR), the transport's retries exhausted
    /// (IBV_WC_RETRY_EXC_ERR, IBV_WC_RNR_RETRY_EXC_ERR).
    connection_lost = 1,
    /// Nobody took the connection: rejected (errc::rejected, on IB and RoCE), or refused by
    /// the peer's host (ECONNREFUSED from rdma_connect, on iWARP). docs/devices.md.
    refused,
    /// Nobody answered in time: errc::unreachable (a connection request unanswered),
    /// ETIMEDOUT from a call, the transport's retries exhausted (IBV_WC_RETRY_EXC_ERR,
    /// IBV_WC_RNR_RETRY_EXC_ERR).
    timed_out,
    /// The library refused the call before making it: an errc of the misuse group
    /// (errc::operation_in_progress to errc::no_device).
    misuse,
};

/// The category of `condition` values ("asio-rdmacm.condition").
const boost::system::error_category& condition_category() noexcept;

inline boost::system::error_condition make_error_condition(condition c) noexcept {
    return {static_cast<int>(c), condition_category()};
}

} // namespace rdmacm

// A specialization of Boost's, not part of the API reference:
/// @cond
template <>
struct boost::system::is_error_code_enum<rdmacm::errc> : std::true_type {};
template <>
struct boost::system::is_error_condition_enum<rdmacm::condition> : std::true_type {};
/// @endcond
