// sharded_accept_server ADDRESS PORT SHARDS: what rdma-core's `cmtime` server does per
// connection (a queue pair, accept, on the peer's DISCONNECTED disconnect and destroy), on a
// shard_pool: accepted on the main thread, each connection served on a shard (round robin).
// For bench/cmtime_compare.sh. Runs until SIGINT or SIGTERM.
#include <rdmacm/rdmacm.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <iostream>

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
        rdmacm::shard_pool pool(static_cast<std::size_t>(std::stoi(argv[3])));
        pool.async_serve(
            l,
            [](rdmacm::connection c) -> asio::awaitable<void> {
                auto attr = rdmacm::rc_qp_init_attr();
                c.id().create_qp(attr);
                co_await c.id().async_accept({}, asio::use_awaitable);
                co_await c.id().async_next_event(asio::as_tuple(asio::use_awaitable)); // DISCONNECTED
                co_await c.id().async_disconnect(asio::as_tuple(asio::use_awaitable));
            },
            asio::detached);
        std::cout << "listening on " << l.local_endpoint() << std::endl;
        asio::signal_set signals(accept_ctx, SIGINT, SIGTERM);
        signals.async_wait([&](boost::system::error_code, int) {
            pool.stop();
            channel.reset();
        });
        accept_ctx.run();
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "sharded_accept_server: " << e.what() << std::endl;
        return 1;
    }
}
