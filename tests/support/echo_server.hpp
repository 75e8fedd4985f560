#pragma once
// A shard pool serving the samples' echo service on a listener, counting what it does: the
// server side of the churn and peer-failure tests.
#include "echo.hpp" // the samples' echo service

#include <rdmacm/rdmacm.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <optional>

namespace rdmacm::test {

struct echo_server_counts {
    std::atomic<std::uint64_t> placed{0}, ended{0}, echoed{0};
    std::optional<error_code> served; // how serving ended, set on `ctx`
};

// Serves `l` with `pool`; a connection's coroutine ends when its peer goes (or the pool stops).
inline void serve_echo(shard_pool& pool, listener& l, boost::asio::io_context& ctx, echo_server_counts& counts) {
    pool.async_serve(
        l,
        [&counts](connection c) -> boost::asio::awaitable<void> {
            ++counts.placed;
            try {
                co_await sample::echo(
                    c.id(), [] {}, [&] { ++counts.echoed; });
            } catch (const boost::system::system_error&) {
                // the disconnect after a flush (the peer is gone), or the pool's stop
            }
            ++counts.ended;
        },
        boost::asio::bind_executor(ctx, [&counts](error_code ec) { counts.served = ec; }));
}

} // namespace rdmacm::test
