// cm_server ADDRESS [PORT]: an RDMA CM server written with co_await.
//
// An accept loop hands each connection request to a coroutine of its own, which reads the
// client's private data, accepts with a greeting of its own, waits for the client to
// disconnect and disconnects too. SIGINT or SIGTERM stops it cleanly: the listener and
// every connection are closed, and the io_context runs out of work.
#include "sample_server.hpp"

#include <iostream>
#include <string>

namespace asio = boost::asio;
using asio::awaitable;

namespace {

std::string text(std::span<const std::byte> b) {
    std::string s(reinterpret_cast<const char*>(b.data()), b.size());
    return s.substr(0, s.find('\0')); // IB pads private data with zeros
}

awaitable<void> serve(rdmacm::connection_request request, int n) {
    sample::awaitable_id conn(std::move(request.id)); // co_await without tokens
    sample::live live(conn);
    std::cout << "server: connection " << n << " from " << conn.remote_endpoint() << " says \""
              << text(request.event.private_data()) << "\"" << std::endl;
    try {
        auto attr = rdmacm::rc_qp_init_attr();
        conn.create_qp(attr);
        const std::string greeting = "welcome, client " + std::to_string(n);
        rdmacm::conn_params params;
        params.private_data = std::as_bytes(std::span(greeting));
        co_await conn.async_accept(params);
        std::cout << "server: connection " << n << " ESTABLISHED" << std::endl;
        for (;;) {
            auto ev = co_await conn.async_next_event();
            std::cout << "server: connection " << n << " " << rdmacm::to_string(ev.type()) << std::endl;
            if (ev.type() == RDMA_CM_EVENT_DISCONNECTED) break;
        }
        co_await conn.async_disconnect();
        std::cout << "server: connection " << n << " closed" << std::endl;
    } catch (const boost::system::system_error& e) {
        std::cout << "server: connection " << n << ": " << e.what() << std::endl;
    }
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2 || argc > 3) {
        std::cerr << "usage: cm_server ADDRESS [PORT]\n";
        return 2;
    }
    return sample::run_server(argv[1], static_cast<unsigned short>(argc == 3 ? std::stoi(argv[2]) : 0), serve);
}
