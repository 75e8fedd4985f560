#pragma once
// A shard pool serving the samples' echo service on a listener, counting what it does: the
// server side of the churn and peer-failure tests.
#include "echo.hpp" // the samples' echo service

#include <rdmacm/rdmacm.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace rdmacm::test {

struct echo_server_counts {
    struct {
        std::atomic<std::uint64_t> placed{0}, ended{0}, received{0}; // received: messages, each echoed
        std::optional<error_code> served;                            // how serving ended, set on `ctx`
    } totals;

    // Each live connection, by its client's port: for failure messages.
    struct live_connection {
        std::uint64_t key = 0;
        bool accepted = false;
        std::uint64_t received = 0;
        std::size_t shard = 0; // where it last received (or was placed)
    };
    mutable std::mutex mutex;
    std::map<unsigned short, live_connection> live;

    // Messages received from the client on `port`, while its connection lives.
    std::uint64_t received_from(unsigned short port) const {
        std::lock_guard lock(mutex);
        auto it = live.find(port);
        return it == live.end() ? 0 : it->second.received;
    }
    std::string describe() const {
        std::lock_guard lock(mutex);
        std::string s = std::to_string(live.size()) + " live server connection(s) (client port: key, received, shard):";
        for (const auto& [port, c] : live)
            s += ' ' + std::to_string(port) + ": " + std::to_string(c.key) + (c.accepted ? "" : " not accepted") +
                 ", " + std::to_string(c.received) + ", " + std::to_string(c.shard) + ';';
        return s;
    }
};

// Serves `l` with `pool`; a connection's coroutine ends when its peer goes (or the pool stops).
inline void serve_echo(shard_pool& pool, listener& l, boost::asio::io_context& ctx, echo_server_counts& counts) {
    pool.async_serve(
        l,
        [&counts, &pool](pooled_connection given) -> boost::asio::awaitable<void> {
            ++counts.totals.placed;
            {
                // Gone at the end of this scope: out of the pool before `ended` counts it.
                pooled_connection c = std::move(given);
                const auto port = c.id().remote_endpoint().port();
                auto note = [&](auto change) {
                    std::lock_guard lock(counts.mutex);
                    auto& mine = counts.live[port];
                    mine.key = c.key();
                    mine.shard = pool.running_shard().value_or(c.shard());
                    change(mine);
                };
                note([](auto&) {});
                try {
                    co_await sample::echo(
                        c.id(), [&] { note([](auto& mine) { mine.accepted = true; }); },
                        [&] {
                            ++counts.totals.received;
                            note([](auto& mine) { ++mine.received; });
                        });
                } catch (const boost::system::system_error&) {
                    // the disconnect after a flush (the peer is gone), or the pool's stop
                }
                std::lock_guard lock(counts.mutex);
                counts.live.erase(port);
            }
            ++counts.totals.ended;
        },
        boost::asio::bind_executor(ctx, [&counts](error_code ec) { counts.totals.served = ec; }));
}

} // namespace rdmacm::test
