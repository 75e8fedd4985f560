// sharded_echo_server ADDRESS [PORT] [SHARDS] [ROTATE_MS]: the echo server, sharded. The main
// thread accepts; each connection is placed on the shard (one of SHARDS threads, default 4)
// with the fewest connections and served there by a coroutine that started on that shard.
// With ROTATE_MS, every ROTATE_MS milliseconds every connection moves on to the next shard,
// live, in the middle of its traffic (a rebalance with a plan of its own: as many moves as
// there can be); every 20th rebalance prints the moves made so far. SIGINT or SIGTERM stops
// it: the listener is closed (requests not yet accepted are rejected), every connection
// closed, the shard threads joined.
#include "echo.hpp"

#include <rdmacm/rdmacm.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <iostream>
#include <sstream>

namespace asio = boost::asio;

int main(int argc, char** argv) {
    if (argc < 2 || argc > 5) {
        std::cerr << "usage: sharded_echo_server ADDRESS [PORT] [SHARDS] [ROTATE_MS]\n";
        return 2;
    }
    const auto port = static_cast<unsigned short>(argc > 2 ? std::stoi(argv[2]) : 0);
    const int shards = argc > 3 ? std::stoi(argv[3]) : 4;
    const std::chrono::milliseconds rotate_every(argc > 4 ? std::stoi(argv[4]) : 0);
    if (shards < 1 || rotate_every.count() < 0) {
        std::cerr << "sharded_echo_server: SHARDS must be positive, ROTATE_MS not negative\n";
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

        // The rotation: a timer on the accepting thread, each rebalance's report back there.
        asio::steady_timer rotation(accept_ctx);
        std::size_t rebalances = 0, moved = 0, failed = 0;
        const rdmacm::rebalance_plan next_shard = [](std::span<const rdmacm::connection_load> all, std::size_t n) {
            std::vector<rdmacm::planned_move> moves;
            if (n < 2) return moves; // (nowhere else to go)
            for (const auto& c : all) moves.push_back({c.key, c.shard, (c.shard + 1) % n});
            return moves;
        };
        std::function<void()> rotate;
        auto tally = [&](boost::system::error_code stopped, const rdmacm::rebalance_report& r) {
            if (stopped) return; // the pool stopped
            moved += r.moved.size();
            failed += r.failed.size(); // (closed meanwhile)
            if (++rebalances % 20 == 0)
                std::cout << "server: " << rebalances << " rebalances, " << moved << " moves made, " << failed
                          << " not (closed meanwhile)" << std::endl;
            rotate();
        };
        rotate = [&] {
            rotation.expires_after(rotate_every);
            rotation.async_wait([&](boost::system::error_code cancelled) {
                if (!cancelled) pool.async_rebalance(next_shard, asio::bind_executor(accept_ctx, tally));
            });
        };
        if (rotate_every.count() > 0) rotate();

        asio::signal_set signals(accept_ctx, SIGINT, SIGTERM);
        signals.async_wait([&](boost::system::error_code, int sig) {
            std::cout << "server: signal " << sig << ", shutting down" << std::endl;
            rotation.cancel();
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
