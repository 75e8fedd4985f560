#pragma once
/// @file
/// `rdmacm::basic_stream`: a byte stream over an RDMA connection — Asio's AsyncReadStream and
/// AsyncWriteStream, so `asio::async_read`, `async_read_until`, Beast and any Asio protocol
/// run over RDMA. Its wire protocol: docs/stream-protocol.md; a guide: docs/streams.md.
#include "rdmacm/connect.hpp"
#include "rdmacm/connection_request.hpp"
#include "rdmacm/pooled_connection.hpp"
#include "rdmacm/detail/stream_base.hpp"
#include "rdmacm/stream_options.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>

#include <type_traits>
#include <utility>

namespace rdmacm {

namespace detail {

// What the composed connect (connect.hpp) does around its steps for a stream: the id made
// on the stream's context, the queue pair, rings and receives before the connect (the hello
// tells of the ring), the server's hello read from ESTABLISHED.
struct attach_stream {
    stream_base& stream;
    boost::asio::any_io_executor ex;
    bool made = false; // the id is this operation's: a failure closes what it made
    std::array<std::byte, stream_hello_size> hello{};

    error_code before_resolve(cm_id& id) {
        if (id.is_open() || stream.is_open()) return boost::asio::error::already_open;
        try {
            id = cm_id(ex);
        } catch (const boost::system::system_error& e) {
            return e.code();
        }
        made = true;
        return {};
    }
    error_code before_connect(cm_id&) {
        const error_code ec = stream_access::prepare(stream, stream_role::client);
        if (!ec) hello = stream_access::hello(stream);
        return ec;
    }
    // The connect's parameters, once prepared.
    conn_params params() const noexcept { return stream_access::params(stream, hello); }
    template <typename Self>
    void complete(Self& self, cm_id&, error_code ec, const cm_event& ev = {}) {
        if (!ec) ec = stream_access::opened(stream, ev.private_data());
        if (ec && made) stream.close();
        self.complete(ec);
    }
};

// The server's side: the client's hello read from the request, the queue pair and receives
// made, accepted with this side's hello. A request without a hello (or of another
// version) is rejected: errc::protocol_error. `Request`: a connection_request or a
// pooled_connection, taken by the stream.
template <typename Request>
struct accept_stream_op {
    stream_base& stream;
    Request request;
    enum class step : std::uint8_t { start, accepting, refused } at = step::start;

    template <typename Self>
    void operator()(Self& self, error_code ec = {}, const cm_event& = {}) {
        if (at != step::start) {
            if (ec && at == step::accepting) stream.close(); // (an open stream refused stays as it was)
            if (!ec) stream_access::accepted(stream);
            return self.complete(ec);
        }
        at = step::accepting;
        if (stream.is_open() || stream.id().is_open()) {
            at = step::refused;
            ec = boost::asio::error::already_open;
        } else {
            ec = stream_access::take(stream, std::move(request));
        }
        if (ec) // (never inside the initiating call)
            return boost::asio::post(stream.id().get_executor(), boost::asio::append(std::move(self), ec));
        const auto mine = stream_access::hello(stream); // (its ring, made by take)
        stream.id().async_accept(stream_access::params(stream, mine), std::move(self));
    }
};

} // namespace detail

/// A byte stream over one reliable connection: an Asio AsyncReadStream and AsyncWriteStream.
/// Made unconnected on an execution context; `async_connect` (client) or `async_accept` of a
/// listener's request (server) opens it. Each side writes its data by RDMA write into a
/// ring of the peer's (`stream_options::ring_size`), never beyond what the peer has read of
/// it, and tells of each write by a message, only against a receive the peer said it
/// posted (`depth`; credits: iWARP ends a connection whose message finds none), so a writer
/// whose reader is slow waits, nothing lost or overrun.
///
/// **Operations**: one read and one write may be outstanding at once (a second of the same
/// kind: errc::operation_in_progress). A write completes once its bytes are copied into the
/// stream's send ring (`ring_size` bytes), as a socket's write completes once the kernel
/// has them; they go to the peer as its ring and receives allow, small writes made
/// meanwhile as one message. A write may write less than asked (a partial transfer;
/// `asio::async_write` goes on), and waits while the send ring is full; a write made in the
/// send ring itself (`async_prepare_write`, then `commit_write`) skips the copy, as does a
/// read of the receive ring itself (`async_read_in_place`, then `consume`). A read
/// completes with at least one byte; after the peer's `shutdown` and everything it sent
/// before, with `asio::error::eof`. Empty buffers complete with 0 at once (never inside the
/// call), also beside an operation of their kind that waits, and after a `shutdown` (as a
/// socket's: Asio's TLS stream reads nothing so to finish an operation).
///
/// **Errors**: `asio::error::connection_reset` once the connection is lost (the peer closed
/// without a shutdown, its host or device went, a send failed); errc::protocol_error when the
/// peer speaks something else (its connection is then ended); `asio::error::broken_pipe` for
/// a write after `shutdown`; errc::not_open once closed.
///
/// **Executor**: handlers run on their associated executor, by default the id's
/// (`get_executor()`): after `async_connect`, the one the stream was made with; after
/// `async_accept`, the request's (its listener's). The stream moves with its id
/// (`id().async_migrate`), as its queue pair does.
///
/// **Cancellation**: a read honours every type: it ends with operation_aborted and loses
/// nothing (bytes that arrive are left for the next read, also when they came before the
/// cancellation but after the wait ended). A write honours every type while it waits for
/// room in the send ring: it ends with operation_aborted, nothing of it written; a write
/// whose bytes were copied completes with their count. The connection is unharmed either way.
///
/// **Closing**: `async_shutdown` (or `shutdown`) sends the end of the data after what was
/// written; `close` ends the connection at once, and what the device has not delivered may be
/// lost — shut down and read to the peer's end first, as Beast's teardown does
/// (rdmacm/beast.hpp).
///
/// **Thread safety**: as Asio's sockets: distinct objects safe, a shared one not (one read
/// and one write outstanding, each started from one thread at a time).
template <typename Executor = boost::asio::any_io_executor>
class basic_stream : public detail::stream_base {
public:
    using executor_type = Executor;
    /// The same stream type on another executor type (e.g. for `as_default_on`).
    template <typename Executor1>
    struct rebind_executor {
        using other = basic_stream<Executor1>;
    };

    /// An unconnected stream. `async_connect` makes its id on the channel of the execution
    /// context `ex` runs on, its handlers then run on `ex` (a strand of it, say); an accepted
    /// stream's run where its request's id is (see the class's description).
    explicit basic_stream(const executor_type& ex, const stream_options& options = {})
        : stream_base(boost::asio::any_io_executor(ex), options) {}
    /// An unconnected stream on `ctx`.
    template <typename ExecutionContext,
              typename = std::enable_if_t<std::is_convertible_v<ExecutionContext&, boost::asio::execution_context&>>>
    explicit basic_stream(ExecutionContext& ctx, const stream_options& options = {})
        : stream_base(boost::asio::any_io_executor(ctx.get_executor()), options) {}
    basic_stream(basic_stream&& other) noexcept = default;
    basic_stream& operator=(basic_stream&& other) noexcept = default;
    ~basic_stream() = default;

    /// The id's executor once connected (it follows the id's migrations), else the one the
    /// stream was made with.
    executor_type get_executor() const { return detail::executor_as<Executor>(current_executor()); }

    /// The lowest layer of a stack of streams over this one: this stream (as a socket is its
    /// own). Layers such as `asio::ssl::stream<rdmacm::stream>` ask for it.
    using lowest_layer_type = basic_stream;
    lowest_layer_type& lowest_layer() noexcept { return *this; }
    const lowest_layer_type& lowest_layer() const noexcept { return *this; }

    /// Resolves `remote`, connects and opens the stream (the composed `rdmacm::async_connect`,
    /// with this side's sizes as private data).
    /// @par Completion Signature
    /// `void(error_code)`.
    /// @par Errors
    /// As for `rdmacm::async_connect`; errc::protocol_error when the server does not speak
    /// the stream protocol; EINVAL ("stream_options") for options out of range;
    /// `asio::error::already_open` for a stream that is open (it is left as it is). A failed
    /// connect leaves the stream closed.
    /// @par Per-Operation Cancellation
    /// As for `rdmacm::async_connect`.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_connect(const endpoint& remote,
                       Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        // (The hello, with the ring made before the connect, replaces the empty one there.)
        const detail::owned_conn_params params(detail::stream_access::params(*this, {}));
        return boost::asio::async_compose<Token, void(error_code)>(
            detail::connect_op<boost::asio::any_io_executor, detail::attach_stream>{
                id_, remote, {.resolve_timeout = options_.resolve_timeout}, params, {*this, executor_}},
            token, executor_);
    }

    /// Accepts a listener's connection request and opens the stream on it.
    /// @par Completion Signature
    /// `void(error_code)`.
    /// @par Errors
    /// As for `cm_id::async_accept`; errc::protocol_error when the request does not come
    /// from a stream (it is rejected); `asio::error::already_open` for a stream that is open
    /// (it is left as it is; the request is rejected). A failed accept leaves the stream
    /// closed.
    /// @par Per-Operation Cancellation
    /// As for `cm_id::async_accept`.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_accept(connection_request request,
                      Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return boost::asio::async_compose<Token, void(error_code)>(
            detail::accept_stream_op<connection_request>{*this, std::move(request)}, token, executor_);
    }

    /// Accepts a connection a `shard_pool` placed (in `async_serve`'s coroutine, say) and opens
    /// the stream on it. The stream keeps the pooled connection (`pooled()`): the pool's
    /// `async_move` and `async_rebalance` move it, and the stream with it, also
    /// mid-transfer; its handlers then run on the connection's shard. Closing the stream
    /// closes the connection and takes it out of the pool. As for the pooled connection
    /// itself, the stream must not outlive the pool's execution contexts.
    /// @par Completion Signature
    /// `void(error_code)`.
    /// @par Errors
    /// As for the overload above.
    /// @par Per-Operation Cancellation
    /// As for `cm_id::async_accept`.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_accept(pooled_connection connection,
                      Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return boost::asio::async_compose<Token, void(error_code)>(
            detail::accept_stream_op<pooled_connection>{*this, std::move(connection)}, token, executor_);
    }

    /// Reads some bytes into `buffers` (at least one, unless they are empty).
    /// @par Completion Signature
    /// `void(error_code, std::size_t)`.
    /// @par Errors
    /// `asio::error::eof` (the peer shut down, everything before read),
    /// `asio::error::connection_reset`, errc::protocol_error, errc::operation_in_progress,
    /// errc::not_open, operation_aborted.
    /// @par Per-Operation Cancellation
    /// terminal, partial, total: nothing is lost (see the class's description).
    template <typename MutableBufferSequence, BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::size_t))
                                                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_read_some(const MutableBufferSequence& buffers,
                         Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return boost::asio::async_initiate<Token, void(error_code, std::size_t)>(
            initiate_read{{}, impl_, executor_}, token, detail::mutable_buffer_list(buffers));
    }

    /// Writes some of `buffers` (at least one byte, unless they are empty).
    /// @par Completion Signature
    /// `void(error_code, std::size_t)`: the bytes copied into the send ring.
    /// @par Errors
    /// `asio::error::connection_reset`, `asio::error::broken_pipe` (after a shutdown),
    /// errc::protocol_error, errc::operation_in_progress, errc::not_open, operation_aborted.
    /// @par Per-Operation Cancellation
    /// terminal, partial, total while it waits: nothing of it was sent.
    template <typename ConstBufferSequence, BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::size_t))
                                                Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_write_some(const ConstBufferSequence& buffers,
                          Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return boost::asio::async_initiate<Token, void(error_code, std::size_t)>(
            initiate_write{{}, impl_, executor_}, token, detail::const_buffer_list(buffers));
    }

    /// The send ring's next free bytes, handed out to be filled in place: a write without the
    /// copy of `async_write_some` (for data made where it goes: serialized, read from a file).
    /// `commit_write(n)` then sends the first `n` of them. Completes once the ring has room,
    /// with 1 to `max_size` bytes: fewer where the ring has less room, or wraps (the next
    /// call hands out its start). Until `commit_write`, the buffer is the caller's and it is
    /// the stream's outstanding write: another write or prepare fails with
    /// errc::operation_in_progress, and the end of the data (`shutdown`) waits for the commit.
    /// The buffer is valid until `commit_write` or `close`.
    /// @par Completion Signature
    /// `void(error_code, asio::mutable_buffer)`; an empty buffer for `max_size` 0 (at once).
    /// @par Errors
    /// As for `async_write_some`.
    /// @par Per-Operation Cancellation
    /// terminal, partial, total until its handler runs: nothing is handed out.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, boost::asio::mutable_buffer))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_prepare_write(std::size_t max_size,
                             Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return boost::asio::async_initiate<Token, void(error_code, boost::asio::mutable_buffer)>(
            initiate_prepare_write{{}, impl_, executor_}, token, max_size);
    }

    /// The next bytes received, handed out where they arrived, in the stream's receive ring:
    /// a read without the copy of `async_read_some` (for data parsed or forwarded where it
    /// is). `consume(n)` then reads the first `n` of them; the rest comes first in the next
    /// buffer. Completes once there are bytes not consumed, with 1 to `max_size` of them —
    /// at once if some are left: to wait for more of a record, keep a copy of what it has
    /// and consume it (a receive of the peer's stays taken until its bytes are consumed, and
    /// the peer's writes wait for them). A buffer ends where the ring does: the bytes after
    /// its end come once those before it are consumed. Until `consume`, the
    /// buffer is the caller's to read and it is the stream's outstanding read: another read
    /// fails with errc::operation_in_progress, and the peer cannot write over the bytes
    /// (their room goes back to it only with `consume`: a buffer kept holds the peer's
    /// writes back). The buffer is valid until `consume` or `close` (a move-assignment to
    /// the stream closes it).
    /// @par Completion Signature
    /// `void(error_code, asio::const_buffer)`; an empty buffer for `max_size` 0 (at once).
    /// @par Errors
    /// As for `async_read_some`. At the end of the data (or once the connection is lost),
    /// with nothing after what was handed out before: `asio::error::eof` (or the error),
    /// with the bytes left unconsumed handed out (maybe none).
    /// @par Per-Operation Cancellation
    /// terminal, partial, total until its handler runs: nothing is handed out, nothing lost.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, boost::asio::const_buffer))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_read_in_place(std::size_t max_size,
                             Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return boost::asio::async_initiate<Token, void(error_code, boost::asio::const_buffer)>(
            initiate_read_in_place{{}, impl_, executor_}, token, max_size);
    }

    /// Sends the end of the data after everything written; completes once it and all
    /// before it were acknowledged by the peer's device (then `close` loses nothing).
    /// @par Completion Signature
    /// `void(error_code)`.
    /// @par Errors
    /// `asio::error::connection_reset`, errc::operation_in_progress, errc::not_open,
    /// operation_aborted (closed meanwhile).
    /// @par Per-Operation Cancellation
    /// None: the end is queued and goes.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_shutdown(Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return boost::asio::async_initiate<Token, void(error_code)>(initiate_shutdown{{}, impl_, executor_}, token);
    }
};

/// The stream on any executor (`any_io_executor`).
using stream = basic_stream<>;

} // namespace rdmacm
