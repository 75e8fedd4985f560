// echo_server ADDRESS [PORT]: an RDMA echo server written with co_await.
//
// Each connection gets a queue pair and a coroutine that sends every message it receives
// straight back, until the peer disconnects (its receives are then flushed). It speaks
// with rdma-core's `ucmatose` client (which checks that as many messages come back as it
// sent) and takes `cmtime`'s connections. SIGINT or SIGTERM stops it cleanly.
#include "echo.hpp"
#include "sample_server.hpp"

#include <iostream>

namespace {

boost::asio::awaitable<void> serve(rdmacm::connection_request request, int n) {
    rdmacm::cm_id conn = std::move(request.id);
    sample::live live(conn);
    std::size_t echoed = 0;
    try {
        echoed = co_await sample::echo(
            conn, [&] { std::cout << "server: connection " << n << " from " << conn.remote_endpoint() << std::endl; });
    } catch (const boost::system::system_error& e) {
        std::cout << "server: connection " << n << ": " << e.what() << std::endl;
    }
    std::cout << "server: connection " << n << " closed after " << echoed << " messages" << std::endl;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2 || argc > 3) {
        std::cerr << "usage: echo_server ADDRESS [PORT]\n";
        return 2;
    }
    return sample::run_server(argv[1], static_cast<unsigned short>(argc == 3 ? std::stoi(argv[2]) : 0), serve);
}
