// The guides' code blocks (docs/*.md), compiled: each sits between two `// [NAME]` lines
// here, and tests/snippets.sh checks that the guide's block marked `<!-- snippet:
// tests/doc_snippets.cpp NAME -->` still equals it. Compiled as part of the build, never
// linked or run: what the blocks do, the samples and tests run.
#include <rdmacm/rdmacm.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <chrono>
#include <iostream>
#include <span>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace guide {

// docs/co_await-connections.md, "Tokens".
asio::awaitable<void> tokens(rdmacm::event_channel& channel, rdmacm::connection_request request) {
    // [tokens]
    // Likewise listener, receive_pool, shard_pool, event_channel.
    using awaitable_id = asio::use_awaitable_t<>::as_default_on_t<rdmacm::cm_id>;
    using awaitable_queue_pair = asio::use_awaitable_t<>::as_default_on_t<rdmacm::queue_pair>;
    awaitable_id id(channel);
    awaitable_id conn(std::move(request.id)); // a plain object converts by a move
    // [tokens]
    static_assert(sizeof(awaitable_queue_pair) > 0);
    co_return;
}

// (The other blocks take these as the guide does.)
using awaitable_id = asio::use_awaitable_t<>::as_default_on_t<rdmacm::cm_id>;
using awaitable_queue_pair = asio::use_awaitable_t<>::as_default_on_t<rdmacm::queue_pair>;
using awaitable_receive_pool = asio::use_awaitable_t<>::as_default_on_t<rdmacm::receive_pool>;

asio::awaitable<void> serve(rdmacm::cm_id id, rdmacm::cm_event request); // (declared only)

// "Server: an accept loop and a coroutine per connection".
asio::awaitable<void> accept_loop(rdmacm::listener& listener, asio::any_io_executor ex) {
    // [accept_loop]
    for (;;) {
        auto [ec, req] = co_await listener.async_get_request(asio::as_tuple(asio::use_awaitable));
        if (ec) co_return; // listener closed
        asio::co_spawn(ex, serve(std::move(req.id), req.event), asio::detached);
    }
    // [accept_loop]
}

// "Client: connect with a time-out".
asio::awaitable<void> connect_with_a_time_out(rdmacm::cm_id& id, rdmacm::endpoint server,
                                              rdmacm::connect_options options, asio::any_io_executor ex) {
    // [connect_time_out]
    using namespace asio::experimental::awaitable_operators;
    asio::steady_timer t(ex, 5s);
    auto r = co_await (rdmacm::async_connect(id, server, options, asio::as_tuple(asio::use_awaitable)) ||
                       t.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (r.index() == 1) {                            /* timed out */
    } else if (auto [ec, ev] = std::get<0>(r); ec) { /* refused or failed: ec, ev */
    }
    // [connect_time_out]
}

// "Moving data".
asio::awaitable<void> moving_data(awaitable_id& id, std::vector<std::byte>& buffer, std::span<const std::byte> message,
                                  std::span<std::byte> reply, std::span<const std::byte> data,
                                  rdmacm::remote_buffer peer_buffer) {
    auto on_message = [](rdmacm::error_code, std::size_t) {};
    // [moving_data]
    awaitable_queue_pair qp(id, {.max_send_wr = 64, .max_recv_wr = 64});
    rdmacm::memory_region mr(qp.pd(), buffer);                       // registered once
    qp.async_receive(mr, std::span(buffer).first(4096), on_message); // before the peer sends
    co_await id.async_connect({});
    co_await qp.async_send(mr, message); // void(error_code, size_t)
    auto n = co_await qp.async_receive(mr, reply);
    co_await qp.async_rdma_write(mr, data, peer_buffer); // peer_buffer: {address, rkey, length}
    // [moving_data]
    (void)n;
}

asio::awaitable<void> gathered(awaitable_queue_pair& qp, const rdmacm::memory_region& header_mr,
                               std::span<const std::byte> header, const rdmacm::memory_region& body_mr,
                               std::span<const std::byte> body) {
    // [gather]
    std::array<rdmacm::const_registered_buffer, 2> message{rdmacm::buffer(header_mr, header),
                                                           rdmacm::buffer(body_mr, body)};
    co_await qp.async_send(message); // one message, header then body
    // [gather]
}

asio::awaitable<void> registered_together(awaitable_queue_pair& qp, std::vector<char>& header, std::vector<char>& body,
                                          std::size_t header_size) {
    // [register_buffers]
    auto registered = rdmacm::register_buffers(qp.pd(), std::vector{asio::buffer(header), asio::buffer(body)});
    co_await qp.async_send(
        std::array<rdmacm::const_registered_buffer, 2>{rdmacm::buffer(registered[0], header_size), registered[1] + 16});
    // [register_buffers]
}

asio::awaitable<void> pooled_receives(awaitable_queue_pair& qp) {
    // [receive_pool]
    awaitable_receive_pool pool(qp, 64, 4096); // before connect / accept
    auto [ec, message] = co_await pool.async_receive(asio::as_tuple(asio::use_awaitable));
    co_await qp.async_send(pool.region(), message.data()); // echo it
    // `message` gives its buffer back to the pool when it goes
    // [receive_pool]
}

asio::awaitable<void> composed_connect(awaitable_id& id, rdmacm::endpoint server) {
    // [composed_connect]
    auto [established, qp, pool] = co_await rdmacm::async_connect(
        id, server,
        rdmacm::data_path_options{.qp = {.max_recv_wr = 64}, .receives = {.depth = 64, .message_size = 4096}});
    // [composed_connect]
}

// docs/moving-connections.md.
asio::awaitable<void> moving(rdmacm::event_channel& channel, rdmacm::event_channel& other_channel,
                             asio::strand<asio::any_io_executor> strand) {
    // [migrate]
    awaitable_id id(channel); // as_default_on: co_await without tokens (co_await-connections.md)
    // ... resolve, connect, use it ...
    co_await id.async_migrate(other_channel);         // other channel's executor
    co_await id.async_migrate(other_channel, strand); // or a strand of your choice
    // [migrate]
}

asio::awaitable<void> synchronous_mode(awaitable_id& id, rdmacm::event_channel& channel, rdmacm::endpoint server,
                                       ibv_qp_init_attr attr) {
    // [synchronous]
    co_await id.async_enter_synchronous_mode(); // no channel of ours
    // then, on a thread that may block:
    rdmacm::error_code ec;
    id.resolve_address(server, 2s, ec);
    id.resolve_route(2s, ec);
    id.create_qp(attr);
    rdmacm::cm_event ev = id.connect({}, ec); // the ESTABLISHED event
    ev = id.next_event(5s, ec);               // e.g. the peer's DISCONNECTED
    co_await id.async_migrate(channel);       // back, with queued events
    // [synchronous]
}

// docs/rebalancing.md.
asio::awaitable<void> rebalancing(rdmacm::pooled_connection& c, double requests_per_second) {
    // [rebalance]
    // A pool whose operations co_await without tokens (as_default_on, as the demo's).
    asio::use_awaitable_t<>::as_default_on_t<rdmacm::shard_pool> pool(4, rdmacm::least_connections());
    // ... serve connections (docs/sharded-servers.md) ...

    // Even the connection counts out; report what moved.
    auto report = co_await pool.async_rebalance(rdmacm::even_count());
    for (auto& m : report.moved) std::cout << m.key << ": " << m.from << " -> " << m.to << "\n";

    // Or by load: each connection reports its own (bytes/s, requests/s, ...).
    c.set_load(requests_per_second);
    co_await pool.async_rebalance(rdmacm::even_load());

    // Or one connection, by hand (by object or by key from pool.snapshot()).
    co_await pool.async_move(c, 3);
    // [rebalance]
}

// docs/streams.md.
std::size_t make_data_in(asio::mutable_buffer b); // (declared only)
asio::awaitable<void> in_place(rdmacm::stream& s) {
    // [in_place]
    asio::mutable_buffer b = co_await s.async_prepare_write(64 * 1024, asio::use_awaitable);
    const std::size_t k = make_data_in(b); // at most b.size() bytes, made where they go
    s.commit_write(k);
    // [in_place]
}

std::size_t parse(asio::const_buffer b); // (declared only)
asio::awaitable<void> read_in_place(rdmacm::stream& s) {
    // [read_in_place]
    asio::const_buffer b = co_await s.async_read_in_place(64 * 1024, asio::use_awaitable);
    const std::size_t k = parse(b); // the bytes it used, read where they arrived
    s.consume(k);                   // the rest is the next read's
    // [read_in_place]
}

// docs/sharded-servers.md.
void sharded(const std::string& address, unsigned short port) {
    // [sharded]
    asio::io_context accept_ctx; // accept here ...
    rdmacm::event_channel channel(accept_ctx);
    rdmacm::listener l(channel);
    l.bind({asio::ip::make_address(address), port});
    l.listen(1024);

    rdmacm::shard_pool pool(4, rdmacm::least_connections()); // ... serve on 4 threads
    pool.async_serve(
        l,
        [](rdmacm::pooled_connection c) -> asio::awaitable<void> {
            // Runs on c's shard. c.id() is still to be accepted.
            rdmacm::queue_pair qp(c.id(), {.max_send_wr = 64, .max_recv_wr = 64});
            co_await c.id().async_accept({}, asio::use_awaitable);
            // ... serve; c closes when it goes
        },
        asio::detached);
    accept_ctx.run();
    // [sharded]
}

} // namespace guide
