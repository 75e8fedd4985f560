#pragma once
/// @file
/// `rdmacm::queue_pair`: a connection's data path — send, receive, RDMA write and read as
/// Asio asynchronous operations, completions read through the context's completion channel or
/// polled by the context's thread (`queue_pair_options::poll_for`).
#include "rdmacm/cm_id.hpp"
#include "rdmacm/detail/queue_pair_base.hpp"
#include "rdmacm/memory_region.hpp"
#include "rdmacm/registered_buffer.hpp"

#include <boost/asio/async_result.hpp>

#include <chrono>
#include <span>
#include <type_traits>

namespace rdmacm {

/// `queue_pair_options::poll_for` for busy polling: the context's thread polls for as long
/// as an operation of the queue pair is outstanding.
inline constexpr std::chrono::nanoseconds busy_polling = std::chrono::nanoseconds::max();

/// The sizes of a queue pair and its completion queue, and how its completions are noticed.
struct queue_pair_options {
    std::uint32_t max_send_wr = 64; ///< sends, writes and reads outstanding at once
    std::uint32_t max_recv_wr = 64; ///< receives posted at once
    /// Bytes a send or write may carry inline; 0 (the default): none. A send or write of 1 to
    /// this many bytes is posted with `IBV_SEND_INLINE`: the provider copies its bytes into
    /// the work request at the post, on the CPU, instead of the device reading them from
    /// their region when it sends (so they must be memory the CPU can read). Its handler
    /// still runs on its completion. A device may refuse a queue pair asking more than it
    /// takes (`rdma_create_qp`: EINVAL; soft-iWARP takes 80 bytes, soft-RoCE 512 on
    /// Debian 12's kernel) or grant less.
    std::uint32_t max_inline_data = 0;
    ibv_pd* pd = nullptr; ///< nullptr: the device's default protection domain (librdmacm's)
    /// How long the context's thread goes on polling the completion queue after its last
    /// completion before it sleeps on the completion channel again.
    ///
    /// Zero (the default; a negative duration too): event-driven. The thread sleeps in the
    /// reactor until the channel's fd is readable: no CPU while idle; per batch of
    /// completions a wake-up and four system calls (the wait's re-arm, reading the event, re-arming the queue, and the
    /// reactor's wait itself).
    ///
    /// Positive (adaptive polling): after a wake-up the thread polls the queue
    /// (`ibv_poll_cq`, no system call) in slices of 50 µs, running the context's other
    /// handlers — CM events, timers, other queue pairs — between slices, until no
    /// completion has come for `poll_for` or nothing is posted that could complete (the
    /// receives a `receive_pool` or a `stream` keeps posted count: the peer's next message
    /// is polled for between reads); then it re-arms the queue and sleeps. `busy_polling`:
    /// until no operation is outstanding (a receive always awaited: for the connection's
    /// life; a pool's or a stream's receives alone do not hold it, so that run() returns).
    ///
    /// The trade: a polling thread is 100 % busy while it polls — one core per polling
    /// context, not per queue pair — for the latency of a poll instead of a wake-up
    /// (bench/perftest_compare.sh prints both modes next to perftest's). The run() of a
    /// polling context does not block between slices (the reactor is asked with a zero
    /// timeout); it returns as it would once no work is left — for an adaptive poller with
    /// receives posted, once it has been idle for `poll_for` and sleeps.
    std::chrono::nanoseconds poll_for{0};
    /// Buffers one send or RDMA write gathers from, or one RDMA read scatters into (the
    /// read also within the device's `max_sge_rd`: siw's is 1); at least 1, at most 32 used.
    std::uint32_t max_send_sge = 4;
    std::uint32_t max_recv_sge = 4; ///< buffers one receive scatters into; at least 1, at most 32 used
};

/// A reliable-connected queue pair on a `cm_id` (`rdma_create_qp`), with one completion
/// queue, whose events come through a completion channel shared by the queue pairs made on
/// the id's execution context (one fd per context and device, read through an Asio
/// descriptor on each context that has a queue pair reporting to it) — and, in polling
/// mode, the queue polled on that context between its other handlers
/// (`queue_pair_options::poll_for`). Create it before `async_connect` / `async_accept` (after the route
/// is resolved, or on a connection request's id); post receives before the peer sends.
///
/// **Operations**: any number outstanding at once, up to the queue pair's sizes (more:
/// ENOMEM from the post, as an error_code). Each completes with `void(error_code,
/// std::size_t)`: the work completion's status (`work_completion_category()`; e.g.
/// IBV_WC_REM_ACCESS_ERR for a bad rkey, IBV_WC_WR_FLUSH_ERR when the connection broke)
/// and its byte count (receives: the bytes received). Completions are polled in batches
/// and handed over in completion order.
///
/// **Executor**: handlers run on their associated executor, by default the id's
/// (`get_executor()`): when the id migrates, the data path moves with it — its completion
/// channel changes context, completions that arrive meanwhile are held and handed over on
/// the new executor first, and once `async_migrate` completed no completion handler runs
/// on the old one. Outstanding work is tracked on the handler's executor.
///
/// **Cancellation**: each operation honours terminal cancellation through its handler's
/// cancellation slot (partial and total are ignored). A posted work request cannot be
/// recalled, so a terminal cancellation puts the queue pair in the error state: the
/// cancelled operation completes with operation_aborted once the device has flushed it (its
/// buffer stays the device's until the handler runs; if it completed before the flush, it
/// completes as it did — a message received is never dropped), every other outstanding one
/// with IBV_WC_WR_FLUSH_ERR, and so do later ones, each in posting order (never before the
/// work posted ahead of it, which the device may still hold). The queue pair is then good only for
/// closing; the peer's operations on the connection fail (nothing it sends lands unseen in
/// a buffer nobody waits for). Hence a time-out on a receive, `co_await
/// (qp.async_receive(mr, buf) || timer.async_wait())`, ends the connection's data path.
/// `close()` (and closing the id) completes every outstanding operation with
/// operation_aborted, once the device has let go of its buffer (the queue pair is put in
/// the error state first).
///
/// **Lifetime**: the buffers and memory regions must outlive the operations. The queue
/// pair is destroyed with the id, and the completion queue after it; this object may go
/// first (then its operations are aborted).
///
/// **Thread safety**: operations may be started from any thread; `close()` too.
///
/// `Executor`: constructible from `any_io_executor` (see `basic_event_channel`).
template <typename Executor = boost::asio::any_io_executor>
class basic_queue_pair : public detail::queue_pair_base {
public:
    using executor_type = Executor;
    /// The same queue pair type on another executor type (e.g. for `as_default_on`).
    template <typename Executor1>
    struct rebind_executor {
        using other = basic_queue_pair<Executor1>;
    };

    /// Creates the completion queue and the queue pair on `id`. Throws system_error naming
    /// the failed call ("ibv_create_cq", "rdma_create_qp", ...), errc::not_open (the id
    /// closed), or errc::no_device (the id has no device yet: resolve its address first).
    template <typename IdExecutor>
    explicit basic_queue_pair(basic_cm_id<IdExecutor>& id, const queue_pair_options& options = {})
        : queue_pair_base(boost::asio::any_io_executor(id.get_executor()), detail::access::impl(id), options) {}
    /// A queue pair that is not open (its operations fail with errc::not_open), on `ex`.
    explicit basic_queue_pair(const executor_type& ex) : queue_pair_base(boost::asio::any_io_executor(ex)) {}
    /// The moved-from queue pair is not open, on the same executor.
    basic_queue_pair(basic_queue_pair&& other) noexcept = default;
    /// Takes over a queue pair of another executor type.
    template <typename Executor1, typename = std::enable_if_t<!std::is_same_v<Executor, Executor1>>>
    basic_queue_pair(basic_queue_pair<Executor1>&& other) noexcept // NOLINT(google-explicit-constructor)
        : queue_pair_base(std::move(other)) {}
    basic_queue_pair& operator=(basic_queue_pair&& other) noexcept = default;
    ~basic_queue_pair() = default;

    /// The id's executor (it follows the id's migrations).
    executor_type get_executor() const { return detail::executor_as<Executor>(current_executor()); }

    /// Sends one message gathered from `buffers`: a `const_registered_buffer` (see
    /// `rdmacm::buffer(mr, part)`) or a range of them.
    /// @par Completion Signature
    /// `void(error_code, std::size_t)`: the work completion's status and the bytes sent.
    /// @par Errors
    /// - Refused before anything is posted:
    ///   - errc::too_many_buffers: more than the queue pair's `max_send_sge`.
    ///   - errc::buffer_not_registered: a part not inside its region.
    ///   - `std::errc::message_size`: more than 2^31 bytes.
    ///   - errc::not_open.
    /// - The post's errno (e.g. ENOMEM: more outstanding than `max_send_wr`).
    /// @par Executor
    /// The handler's, by default `get_executor()` (the id's, wherever it moves).
    /// @par Per-Operation Cancellation
    /// terminal (the queue pair goes to error; see the class's description).
    template <registered_buffer_sequence<const_registered_buffer> ConstRegisteredBuffers,
              BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::size_t))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_send(const ConstRegisteredBuffers& buffers,
                    Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return start_post<const_registered_buffer>(detail::work_request::kind::send, buffers, {},
                                                   std::forward<Token>(token));
    }
    /// Sends `data`, which lies inside `mr`: `async_send(buffer(mr, data), token)`.
    /// @par Completion Signature
    /// As for the overload above, which it calls.
    /// @par Per-Operation Cancellation
    /// As for the overload above.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::size_t))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_send(const memory_region& mr, std::span<const std::byte> data,
                    Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return async_send(buffer(mr, data), std::forward<Token>(token));
    }
    /// Receives one message, scattered over `buffers` in order (a
    /// `mutable_registered_buffer` or a range of them); completes with its length.
    /// @par Completion Signature
    /// `void(error_code, std::size_t)`.
    /// @par Errors
    /// - As for async_send (`max_recv_sge`, `max_recv_wr`).
    /// - A message longer than the buffers fails the receive and the queue pair, with the
    ///   device's status: IBV_WC_LOC_LEN_ERR on siw, IBV_WC_LOC_QP_OP_ERR on rxe (whose
    ///   sender gets IBV_WC_REM_OP_ERR; docs/devices.md).
    /// @par Executor
    /// As for async_send.
    /// @par Per-Operation Cancellation
    /// terminal (the queue pair goes to error; see the class's description).
    template <registered_buffer_sequence<mutable_registered_buffer> MutableRegisteredBuffers,
              BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::size_t))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_receive(const MutableRegisteredBuffers& buffers,
                       Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return start_post<mutable_registered_buffer>(detail::work_request::kind::receive, buffers, {},
                                                     std::forward<Token>(token));
    }
    /// Receives one message into `buffer`, which lies inside `mr`.
    /// @par Completion Signature
    /// As for the overload above, which it calls.
    /// @par Per-Operation Cancellation
    /// As for the overload above.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::size_t))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_receive(const memory_region& mr, std::span<std::byte> buffer,
                       Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return async_receive(rdmacm::buffer(mr, buffer), std::forward<Token>(token));
    }
    /// Writes what `buffers` hold, gathered in order, into the peer's `remote` buffer (RDMA write).
    /// @par Completion Signature
    /// `void(error_code, std::size_t)`.
    /// @par Errors
    /// - As for async_send.
    /// - errc::remote_buffer_too_small.
    /// - A bad rkey is the peer's IBV_WC_REM_ACCESS_ERR.
    /// @par Executor
    /// As for async_send.
    /// @par Per-Operation Cancellation
    /// terminal (the queue pair goes to error; see the class's description).
    template <registered_buffer_sequence<const_registered_buffer> ConstRegisteredBuffers,
              BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::size_t))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_rdma_write(const ConstRegisteredBuffers& buffers, const remote_buffer& remote,
                          Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return start_post<const_registered_buffer>(detail::work_request::kind::write, buffers, remote,
                                                   std::forward<Token>(token));
    }
    /// Writes `data`, which lies inside `mr`, into the peer's `remote` buffer.
    /// @par Completion Signature
    /// As for the overload above, which it calls.
    /// @par Per-Operation Cancellation
    /// As for the overload above.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::size_t))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_rdma_write(const memory_region& mr, std::span<const std::byte> data, const remote_buffer& remote,
                          Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return async_rdma_write(buffer(mr, data), remote, std::forward<Token>(token));
    }
    /// Reads the peer's `remote` buffer into `buffers`, scattered in order (RDMA read; more
    /// than one buffer as the device allows: errc::too_many_buffers beyond its `max_sge_rd`).
    /// @par Completion Signature
    /// As for async_rdma_write.
    /// @par Per-Operation Cancellation
    /// terminal (the queue pair goes to error; see the class's description).
    template <registered_buffer_sequence<mutable_registered_buffer> MutableRegisteredBuffers,
              BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::size_t))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_rdma_read(const MutableRegisteredBuffers& buffers, const remote_buffer& remote,
                         Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return start_post<mutable_registered_buffer>(detail::work_request::kind::read, buffers, remote,
                                                     std::forward<Token>(token));
    }
    /// Reads the peer's `remote` buffer into `buffer`, which lies inside `mr`.
    /// @par Completion Signature
    /// As for the overload above, which it calls.
    /// @par Per-Operation Cancellation
    /// As for the overload above.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::size_t))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_rdma_read(const memory_region& mr, std::span<std::byte> buffer, const remote_buffer& remote,
                         Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return async_rdma_read(rdmacm::buffer(mr, buffer), remote, std::forward<Token>(token));
    }
};

/// The queue pair on any executor (`any_io_executor`).
using queue_pair = basic_queue_pair<>;

} // namespace rdmacm
