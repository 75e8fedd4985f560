#pragma once
// The compiled, executor-agnostic part of basic_stream: the connection's id, a handle on the
// stream's engine (stream_impl, compiled in src/stream/: its buffers, credits and lock stay
// out of what users include), and the initiations of its operations. Defined in
// src/stream/stream.cpp.
#include "rdmacm/cm_id.hpp"
#include "rdmacm/detail/access.hpp"
#include "rdmacm/detail/initiation.hpp"
#include "rdmacm/detail/io_handle.hpp"
#include "rdmacm/pooled_connection.hpp"
#include "rdmacm/error.hpp"
#include "rdmacm/stream_options.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/buffer.hpp>

#include <array>
#include <cstddef>
#include <memory>
#include <span>

namespace rdmacm {
struct connection_request;
} // namespace rdmacm

namespace rdmacm::detail {

class stream_impl;

// The first buffers of a buffer sequence (empty ones left out), as the compiled core takes
// them: at most `max_parts`, as Asio's sockets take at most 64 (a read or write of more
// moves what these hold: a partial transfer, which the sequence's next call goes on from).
template <typename Buffer>
struct buffer_list {
    static constexpr std::size_t max_parts = 16;
    std::array<Buffer, max_parts> parts{};
    std::size_t count = 0;
    std::size_t bytes = 0;

    buffer_list() = default;
    template <typename Sequence>
    explicit buffer_list(const Sequence& sequence) {
        const auto end = boost::asio::buffer_sequence_end(sequence);
        for (auto it = boost::asio::buffer_sequence_begin(sequence); it != end && count < max_parts; ++it) {
            const Buffer b(*it);
            if (b.size() == 0) continue;
            parts[count++] = b;
            bytes += b.size();
        }
    }
    std::span<const Buffer> view() const noexcept { return {parts.data(), count}; }
};
using mutable_buffer_list = buffer_list<boost::asio::mutable_buffer>;
using const_buffer_list = buffer_list<boost::asio::const_buffer>;

enum class stream_role : std::uint8_t { client, server };
// The bytes of a stream's hello (docs/stream-protocol.md).
inline constexpr std::size_t stream_hello_size = 24;

class stream_base : public io_handle<stream_base, stream_impl> {
public:
    using handler = completion_handler<void(error_code, std::size_t)>;
    using shutdown_handler = completion_handler<void(error_code)>;
    using fill_handler = completion_handler<void(error_code, boost::asio::mutable_buffer)>;
    using view_handler = completion_handler<void(error_code, boost::asio::const_buffer)>;

    /// Whether the stream has a connection (or one being opened).
    bool is_open() const noexcept { return impl_ != nullptr; }
    /// Ends every operation (operation_aborted), and the connection: what was written and
    /// not yet delivered may be lost — `async_shutdown` first for an orderly end.
    void close() noexcept;
    /// Sends the first `n` bytes of the buffer `async_prepare_write` handed out, as a write of
    /// them would (Nagle's rule and all), and gives the rest back (`commit_write(0)` gives it
    /// all back; with nothing handed out, it does nothing). Throws system_error: EINVAL
    /// ("commit_write") for more than was handed out (nothing is sent; the buffer stays
    /// handed out); errc::not_open once closed; `asio::error::connection_reset` or
    /// errc::protocol_error once the connection is lost (the bytes cannot go).
    void commit_write(std::size_t n);
    /// As above, the error in `ec`.
    void commit_write(std::size_t n, error_code& ec) noexcept;
    /// Reads the first `n` bytes of the buffer `async_read_in_place` handed out, as a read of
    /// them would: their room in the ring goes back to the peer. The rest stays for the next
    /// read (`consume(0)` leaves it all; with nothing handed out, it does nothing). Throws
    /// system_error: EINVAL ("consume") for more than was handed out (nothing is read; the
    /// buffer stays handed out); errc::not_open once closed.
    void consume(std::size_t n);
    /// As above, the error in `ec`.
    void consume(std::size_t n, error_code& ec) noexcept;
    /// Sends the end of the data after everything written, and returns (as a socket's
    /// `shutdown(shutdown_send)`): the peer reads what came before it, then
    /// `asio::error::eof`. Later writes fail with `asio::error::broken_pipe`. Idempotent.
    void shutdown() noexcept;
    /// The connection's id (its endpoints, its migration); empty until connected. A stream
    /// accepted on a pooled connection uses that one's id.
    cm_id& id() noexcept { return pooled_ ? pooled_->id() : id_; }
    const cm_id& id() const noexcept { return pooled_ ? pooled_->id() : id_; }
    /// The pooled connection the stream was accepted on (its shard, its key for
    /// `shard_pool::async_move`), or nullptr.
    pooled_connection* pooled() noexcept { return pooled_.get(); }
    const pooled_connection* pooled() const noexcept { return pooled_.get(); }

    stream_base(stream_base&& other) noexcept;
    stream_base& operator=(stream_base&& other) noexcept;

protected:
    stream_base(const executor_type& ex, const stream_options& options) noexcept;
    ~stream_base() { close(); }
    // The id's executor as it is now (it moves), or the handle's when not open.
    executor_type current_executor() const { return current_executor(impl_, executor_); }

    // What this side tells the peer (the connect's or the accept's private data), once
    // prepared (its ring is in it).
    std::array<std::byte, stream_hello_size> hello() const noexcept;

    cm_id id_;
    stream_options options_;

private:
    // The pooled connection accepted on, whose id is the stream's (id()); on the heap, where
    // its pool finds it while the stream moves.
    std::unique_ptr<pooled_connection> pooled_;
    friend struct stream_access;
    // The opening, for the composed connect and accept (stream.hpp).
    // A queue pair on `id_` and the engine, its receives posted (before the connect or accept).
    error_code prepare(stream_role role) noexcept;
    // The peer's private data (its hello), once the connect completed.
    error_code opened(std::span<const std::byte> peer_private_data) noexcept;
    // The server's side before its accept: the request's id taken, its hello read, the queue
    // pair and receives made; a request without a hello is rejected (errc::protocol_error).
    error_code take(connection_request&& request) noexcept;
    // The same on a pooled connection, which the stream keeps from then on.
    error_code take(pooled_connection&& connection) noexcept;
    // Both: with the peer's private data, on id().
    error_code open_on(std::span<const std::byte> peer_private_data) noexcept;
    // The accept completed: the connection is up on both sides.
    void accepted() noexcept;

    static executor_type current_executor(const std::shared_ptr<stream_impl>& impl, const executor_type& fallback);
    // With no engine, errc::not_open on `fallback`.
    static void start_read(const std::shared_ptr<stream_impl>& impl, const executor_type& fallback, handler h,
                           const mutable_buffer_list& buffers);
    static void start_write(const std::shared_ptr<stream_impl>& impl, const executor_type& fallback, handler h,
                            const const_buffer_list& buffers);
    static void start_prepare_write(const std::shared_ptr<stream_impl>& impl, const executor_type& fallback,
                                    fill_handler h, std::size_t max_size);
    static void start_read_in_place(const std::shared_ptr<stream_impl>& impl, const executor_type& fallback,
                                    view_handler h, std::size_t max_size);
    static void start_shutdown(const std::shared_ptr<stream_impl>& impl, const executor_type& fallback,
                               shutdown_handler h);

protected:
    // The initiation of one of the operations: `Start` (start_read, ...) given the handler
    // type-erased, the engine and the executor that completes with errc::not_open without
    // one. One type per operation, named as Asio's initiations are.
    template <typename Signature, auto Start>
    struct initiate : initiation<initiate<Signature, Start>, Signature, work_of_followers::by_object> {
        std::shared_ptr<stream_impl> impl;
        executor_type fallback;
        executor_type get_executor() const { return current_executor(impl, fallback); }
        template <typename Handler, typename... Args>
        void operator()(Handler&& h, Args&&... args) const {
            Start(impl, fallback, this->erase(std::forward<Handler>(h)), std::forward<Args>(args)...);
        }
    };
    using initiate_read = initiate<void(error_code, std::size_t), &stream_base::start_read>;
    using initiate_write = initiate<void(error_code, std::size_t), &stream_base::start_write>;
    using initiate_prepare_write =
        initiate<void(error_code, boost::asio::mutable_buffer), &stream_base::start_prepare_write>;
    using initiate_read_in_place =
        initiate<void(error_code, boost::asio::const_buffer), &stream_base::start_read_in_place>;
    using initiate_shutdown = initiate<void(error_code), &stream_base::start_shutdown>;
};

// The opening's steps, for the composed operations in stream.hpp.
struct stream_access {
    static error_code prepare(stream_base& s, stream_role role) noexcept { return s.prepare(role); }
    static error_code opened(stream_base& s, std::span<const std::byte> peer_private_data) noexcept {
        return s.opened(peer_private_data);
    }
    static error_code take(stream_base& s, connection_request&& request) noexcept { return s.take(std::move(request)); }
    static error_code take(stream_base& s, pooled_connection&& connection) noexcept {
        return s.take(std::move(connection));
    }
    static void accepted(stream_base& s) noexcept { s.accepted(); }
    static std::array<std::byte, stream_hello_size> hello(const stream_base& s) noexcept { return s.hello(); }
    // What the stream's connect or accept sends: its hello, and its options' time-out.
    static conn_params params(const stream_base& s, std::span<const std::byte> hello) noexcept {
        return {.private_data = hello, .ack_timeout = s.options_.ack_timeout};
    }
};

} // namespace rdmacm::detail
