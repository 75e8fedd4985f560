#pragma once
/// @file
/// `rdmacm::basic_receive_pool`: receives kept posted on a queue pair, messages taken in
/// order — a receive that can time out without losing what comes later.
#include "rdmacm/detail/access.hpp"
#include "rdmacm/detail/initiation.hpp"
#include "rdmacm/detail/receive_pool_base.hpp"
#include "rdmacm/queue_pair.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/system/system_error.hpp>

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <type_traits>

namespace rdmacm {

/// A message a `receive_pool` received: its bytes stay in the pool's buffer (inside the
/// pool's `region()`, so they can be sent on as they are) until this object is destroyed,
/// which gives the buffer back for another receive. Move-only; may be destroyed on any
/// thread. Empty when the operation that yielded it failed.
class received_message {
public:
    received_message() noexcept = default;
    received_message(received_message&& other) noexcept
        : pool_(std::move(other.pool_)), data_(other.data_), slot_(other.slot_) {}
    received_message& operator=(received_message&& other) noexcept {
        if (this != &other) {
            give_back();
            pool_ = std::move(other.pool_);
            data_ = other.data_;
            slot_ = other.slot_;
        }
        return *this;
    }
    received_message(const received_message&) = delete;
    received_message& operator=(const received_message&) = delete;
    ~received_message() { give_back(); }

    std::span<const std::byte> data() const noexcept { return pool_ ? data_ : std::span<const std::byte>{}; }
    std::size_t size() const noexcept { return data().size(); }
    bool empty() const noexcept { return size() == 0; }

private:
    friend struct detail::access;
    // A message, `data`, in buffer `slot` of `pool` (made by the library).
    received_message(std::shared_ptr<detail::receive_pool_impl> pool, std::uint32_t slot,
                     std::span<const std::byte> data) noexcept
        : pool_(std::move(pool)), data_(data), slot_(slot) {}

    void give_back() noexcept; // its buffer, back for another receive
    std::shared_ptr<detail::receive_pool_impl> pool_;
    std::span<const std::byte> data_;
    std::uint32_t slot_ = 0;
};

/// A receive pool's size (what the composed `async_connect` posts before it connects).
struct receive_pool_options {
    std::size_t depth = 16;          ///< receives kept posted: at most the queue pair's `max_recv_wr`
    std::size_t message_size = 4096; ///< the largest message, in bytes
};

/// `depth` receives of up to `message_size` bytes each, kept posted on a queue pair in
/// memory of the pool's own (registered on the queue pair's protection domain), and the
/// messages they receive, queued in arrival order until `async_receive` takes them. Post
/// the receives before the peer can send: create the pool before `async_accept` /
/// `async_connect` (iWARP has no receiver-not-ready retry: a message that finds no receive
/// posted breaks the connection). Keep the pool's depth within the queue pair's
/// `max_recv_wr`.
///
/// Unlike `queue_pair::async_receive`, a receive from the pool can be cancelled with every
/// cancellation type, the connection unharmed and nothing lost: a message is taken from
/// the pool only when the operation's handler is about to run, so one that arrives after
/// the wait ended, or before a cancellation that reached the operation ahead of its
/// handler, waits for the next `async_receive`. So
/// `co_await (pool.async_receive() || timer.async_wait())` is a receive with a time-out,
/// even when the message and the time-out come together.
///
/// Lifetime: destroying the pool ends a waiting operation (operation_aborted); its buffers
/// live on, held by the receives still posted (the device may still write into them) and
/// by the messages not yet destroyed, until the queue pair flushes them (at the latest when
/// it is closed). Thread safety: `async_receive` from one thread at a time (as for any Asio
/// I/O object); messages may be destroyed on any thread.
///
/// `Executor`: constructible from `any_io_executor` (see `basic_event_channel`).
template <typename Executor = boost::asio::any_io_executor>
class basic_receive_pool : public detail::receive_pool_base {
public:
    using executor_type = Executor;
    /// The same pool type on another executor type (e.g. for `as_default_on`).
    template <typename Executor1>
    struct rebind_executor {
        using other = basic_receive_pool<Executor1>;
    };

    /// Throws system_error ("ibv_reg_mr"), errc::not_open (a closed queue pair), or
    /// std::invalid_argument for a depth or message size of 0 or beyond 2^32 − 1.
    template <typename QueuePairExecutor>
    basic_receive_pool(basic_queue_pair<QueuePairExecutor>& qp, std::size_t depth, std::size_t message_size)
        : receive_pool_base(boost::asio::any_io_executor(qp.get_executor()), detail::access::impl(qp), depth,
                            message_size) {}
    /// A pool that is not open (its receive fails with errc::not_open), on `ex`.
    explicit basic_receive_pool(const executor_type& ex) : receive_pool_base(boost::asio::any_io_executor(ex)) {}
    basic_receive_pool(basic_receive_pool&& other) noexcept = default;
    basic_receive_pool& operator=(basic_receive_pool&& other) noexcept = default;
    ~basic_receive_pool() = default;

    /// The queue pair's executor (it follows the id's migrations).
    executor_type get_executor() const { return detail::executor_as<Executor>(current_executor()); }

    /// Takes the next message, in the order they arrived; waits for one if none is there.
    ///
    /// @par Completion Signature
    /// `void(error_code, received_message)`.
    /// @par Errors
    /// - The work completion's status once every message received before the queue pair
    ///   broke was taken (e.g. IBV_WC_WR_FLUSH_ERR: the connection is gone), then that one
    ///   again for every later call.
    /// - errc::operation_in_progress: another receive of this pool waits.
    /// - errc::not_open, operation_aborted.
    /// @par Executor
    /// The handler's, by default `get_executor()` (the queue pair's: the id's, wherever it
    /// moves).
    /// @par Per-Operation Cancellation
    /// terminal, partial, total: the operation ends with operation_aborted and nothing is
    /// lost (a message that arrives later waits for the next call) — also when the
    /// cancellation comes after the message did, as long as the handler has not run yet.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, received_message))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_receive(Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return start_receive(std::forward<Token>(token));
    }
};

/// The receive pool on any executor (`any_io_executor`).
using receive_pool = basic_receive_pool<>;

} // namespace rdmacm
