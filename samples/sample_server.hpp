#pragma once
// What the sample servers share: a listener on ADDRESS:PORT (0: any free port, printed as
// "server: listening on ..."), an accept loop that hands each connection request to a
// coroutine of its own, and a clean stop on SIGINT or SIGTERM — the listener and every
// live connection closed, the io_context then out of work ("server: stopped cleanly").
#include "awaitable.hpp"

#include <rdmacm/rdmacm.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <functional>
#include <iostream>
#include <set>
#include <string>

namespace sample {

// The connections being served, closed at shutdown: each serving coroutine holds a
// `live` for its id (of any executor type).
class live {
public:
    template <typename Id>
    explicit live(Id& id) : close_([&id] { id.close(); }) {
        all().insert(this);
    }
    ~live() { all().erase(this); }
    live(const live&) = delete;
    live& operator=(const live&) = delete;
    static std::set<live*>& all() {
        static std::set<live*> served;
        return served;
    }
    void close() const { close_(); }

private:
    std::function<void()> close_;
};

// Serves on `address`:`port` until a signal; `serve(request, n)` (an awaitable) handles
// the n-th connection request. Returns main's exit status.
template <typename Serve>
int run_server(const std::string& address, unsigned short port, Serve serve) {
    namespace asio = boost::asio;
    try {
        asio::io_context ctx;
        auto channel = std::make_unique<rdmacm::event_channel>(ctx);
        rdmacm::listener l(*channel);
        l.bind({asio::ip::make_address(address), port});
        l.listen(1024);
        std::cout << "server: listening on " << l.local_endpoint() << std::endl;
        asio::signal_set signals(ctx, SIGINT, SIGTERM);
        signals.async_wait([&](boost::system::error_code, int sig) {
            std::cout << "server: signal " << sig << ", shutting down" << std::endl;
            l.close();
            for (auto* c : live::all()) c->close();
            channel.reset(); // the last id gone, the channel goes and run() returns
        });
        asio::co_spawn(
            ctx,
            [&]() -> asio::awaitable<void> {
                for (int n = 1;; ++n) {
                    auto [ec, request] = co_await l.async_get_request(asio::as_tuple(asio::use_awaitable));
                    if (ec) co_return; // closed
                    asio::co_spawn(ctx, serve(std::move(request), n), asio::detached);
                }
            },
            asio::detached);
        ctx.run();
        std::cout << "server: stopped cleanly" << std::endl;
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "server: " << e.what() << std::endl;
        return 1;
    }
}

} // namespace sample
