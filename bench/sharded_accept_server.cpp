// sharded_accept_server ADDRESS PORT SHARDS: what rdma-core's `cmtime` server does per
// connection (a queue pair, accept, on the peer's DISCONNECTED disconnect and destroy), on a
// shard_pool: accepted on the main thread, each connection served on a shard (round robin).
// SHARDS 0: no pool, every connection served on the accepting thread (the library's base
// cost). For bench/cmtime_compare.sh. Runs until SIGINT or SIGTERM, then waits (up to 10 s)
// for the connections it serves to end and prints `established N`: the connections it
// accepted, which the script checks against those the client asked for.
#include <rdmacm/rdmacm.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <optional>

namespace asio = boost::asio;

int main(int argc, char** argv) {
    if (argc != 4) {
        std::cerr << "usage: sharded_accept_server ADDRESS PORT SHARDS\n";
        return 2;
    }
    try {
        asio::io_context accept_ctx;
        auto channel = std::make_unique<rdmacm::event_channel>(accept_ctx);
        rdmacm::listener l(*channel);
        l.bind({asio::ip::make_address(argv[1]), static_cast<unsigned short>(std::stoi(argv[2]))});
        l.listen(1024);
        std::atomic<std::size_t> started{0}, ended{0}, established{0};
        std::once_flag cq_made;
        ibv_cq* cq = nullptr;
        auto serve = [&](rdmacm::cm_id& id) -> asio::awaitable<void> {
            ++started;
            struct end_count {
                std::atomic<std::size_t>& n;
                ~end_count() { ++n; }
            } counted{ended};
            // One CQ for every QP, without a completion channel, as cmtime's server has: a
            // CQ pair and a channel (2 fds) per QP would be more work than it does, and
            // would run out of fds at about 500 connections. Never polled (no traffic); it
            // goes with the process.
            std::call_once(cq_made, [&] { cq = ibv_create_cq(id.native_handle()->verbs, 1, nullptr, nullptr, 0); });
            if (!cq) throw std::runtime_error("ibv_create_cq failed");
            auto attr = rdmacm::rc_qp_init_attr();
            attr.send_cq = attr.recv_cq = cq;
            id.create_qp(attr);
            co_await id.async_accept({}, asio::use_awaitable);
            ++established;
            co_await id.async_next_event(asio::as_tuple(asio::use_awaitable)); // DISCONNECTED
            co_await id.async_disconnect(asio::as_tuple(asio::use_awaitable));
        };
        const int shards = std::stoi(argv[3]);
        std::optional<rdmacm::shard_pool> pool;
        if (shards > 0) {
            pool.emplace(static_cast<std::size_t>(shards));
            pool->async_serve(
                l, [&](rdmacm::pooled_connection c) -> asio::awaitable<void> { co_await serve(c.id()); },
                asio::detached);
        } else {
            asio::co_spawn(
                accept_ctx,
                [&]() -> asio::awaitable<void> {
                    for (;;) {
                        auto [ec, r] = co_await l.async_get_request(asio::as_tuple(asio::use_awaitable));
                        if (ec) co_return;
                        asio::co_spawn(
                            accept_ctx,
                            [&, id = std::move(r.id)]() mutable -> asio::awaitable<void> { co_await serve(id); },
                            asio::detached);
                    }
                },
                asio::detached);
        }
        std::cout << "listening on " << l.local_endpoint() << std::endl;
        asio::signal_set signals(accept_ctx, SIGINT, SIGTERM);
        asio::steady_timer settle(accept_ctx);
        auto deadline = std::chrono::steady_clock::now();
        std::function<void()> finish = [&] {
            if (started != ended && std::chrono::steady_clock::now() < deadline) {
                settle.expires_after(std::chrono::milliseconds(10));
                settle.async_wait([&](boost::system::error_code) { finish(); });
                return;
            }
            if (pool) pool->stop();
            channel.reset();
            std::cout << "established " << established << std::endl;
        };
        signals.async_wait([&](boost::system::error_code, int) {
            l.close();
            deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            finish();
        });
        accept_ctx.run();
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "sharded_accept_server: " << e.what() << std::endl;
        return 1;
    }
}
