// sharded_echo_server ADDRESS [PORT] [SHARDS]: the echo server, sharded. The main thread
// accepts; each connection is placed on the shard (one of SHARDS threads, default 4) with the
// fewest connections and served there by a coroutine that started on that shard. SIGINT or
// SIGTERM stops it: the listener is closed (requests not yet accepted are rejected), every
// connection closed, the shard threads joined.
#include "echo.hpp"

#include <rdmacm/rdmacm.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/signal_set.hpp>

#include <atomic>
#include <iostream>
#include <sstream>

namespace asio = boost::asio;

int main(int argc, char** argv) {
    if (argc < 2 || argc > 4) {
        std::cerr << "usage: sharded_echo_server ADDRESS [PORT] [SHARDS]\n";
        return 2;
    }
    const auto port = static_cast<unsigned short>(argc > 2 ? std::stoi(argv[2]) : 0);
    const int shards = argc > 3 ? std::stoi(argv[3]) : 4;
    if (shards < 1) {
        std::cerr << "sharded_echo_server: SHARDS must be positive\n";
        return 2;
    }
    try {
        asio::io_context accept_ctx;
        auto channel = std::make_unique<rdmacm::event_channel>(accept_ctx);
        rdmacm::listener l(*channel);
        l.bind({asio::ip::make_address(argv[1]), port});
        l.listen(1024);
        rdmacm::shard_pool pool(static_cast<std::size_t>(shards), rdmacm::least_connections());
        std::cout << "server: " << shards << " shards, listening on " << l.local_endpoint() << std::endl;

        std::atomic<int> accepted = 0;
        pool.async_serve(
            l,
            [&](rdmacm::pooled_connection c) -> asio::awaitable<void> {
                const int n = ++accepted;
                try {
                    auto echoed = co_await sample::echo(c.id(), [&] {
                        std::ostringstream line; // one write: shards print at once
                        line << "server: connection " << n << " on shard " << c.shard() << " from "
                             << c.id().remote_endpoint() << "\n";
                        std::cout << line.str() << std::flush;
                    });
                    std::ostringstream line;
                    line << "server: connection " << n << " closed after " << echoed << " messages\n";
                    std::cout << line.str() << std::flush;
                } catch (const boost::system::system_error& e) {
                    std::ostringstream line;
                    line << "server: connection " << n << ": " << e.what() << "\n";
                    std::cout << line.str() << std::flush;
                }
            },
            asio::detached);

        asio::signal_set signals(accept_ctx, SIGINT, SIGTERM);
        signals.async_wait([&](boost::system::error_code, int sig) {
            std::cout << "server: signal " << sig << ", shutting down" << std::endl;
            pool.stop(); // closes the listener and the connections, joins the shards
            channel.reset();
        });
        accept_ctx.run();
        std::cout << "server: " << accepted << " connections served; stopped cleanly" << std::endl;
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "server: " << e.what() << std::endl;
        return 1;
    }
}
