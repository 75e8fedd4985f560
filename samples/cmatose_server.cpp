// cmatose_server ADDRESS PORT [COUNT] [SIZE]: the server side of rdma-core's `ucmatose`
// test, written with co_await, so that rdma-core's own clients can use it:
//   ucmatose -s ADDRESS -p PORT -C COUNT -S SIZE   (COUNT messages each way)
//   cmtime -s ADDRESS -p PORT -c N                 (run this with COUNT 0)
// Per connection: COUNT receives posted, accept, COUNT messages of SIZE bytes sent, the
// client's COUNT replies received, disconnect (with COUNT 0: the client's disconnect
// answered). Stops on SIGINT or SIGTERM.
#include "sample_server.hpp"

#include <iostream>

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;

namespace {

awaitable<void> serve(rdmacm::connection_request request, int n, std::uint32_t count, std::size_t size) {
    sample::awaitable_id conn(std::move(request.id)); // co_await without tokens
    sample::live live(conn);
    try {
        const std::uint32_t depth = std::max<std::uint32_t>(count, 1);
        sample::awaitable_queue_pair qp(conn, {.max_send_wr = depth, .max_recv_wr = depth});
        rdmacm::receive_pool replies(qp, depth, size); // posted before the accept
        std::vector<std::byte> out(size, std::byte{0x5a});
        rdmacm::memory_region out_mr(qp.pd(), out);
        co_await conn.async_accept({});
        for (std::uint32_t i = 0; i < count; ++i) co_await qp.async_send(out_mr, out);
        std::uint32_t received = 0;
        while (received < count) {
            auto [ec, reply] = co_await replies.async_receive(asio::as_tuple(use_awaitable));
            if (ec) throw boost::system::system_error(ec, "receive");
            ++received;
        }
        std::cout << "server: connection " << n << ": sent " << count << ", received " << received << std::endl;
        if (count == 0) { // cmtime: the client disconnects when it is done
            for (;;) {
                auto ev = co_await conn.async_next_event();
                if (ev.type() == RDMA_CM_EVENT_DISCONNECTED) break;
            }
        } // ucmatose: the server disconnects once the replies are in
        co_await conn.async_disconnect();
    } catch (const boost::system::system_error& e) {
        std::cout << "server: connection " << n << ": " << e.what() << std::endl;
    }
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 3 || argc > 5) {
        std::cerr << "usage: cmatose_server ADDRESS PORT [COUNT] [SIZE]\n";
        return 2;
    }
    const auto count = static_cast<std::uint32_t>(argc > 3 ? std::stoul(argv[3]) : 10);
    const std::size_t size = argc > 4 ? std::stoul(argv[4]) : 100;
    return sample::run_server(argv[1], static_cast<unsigned short>(std::stoi(argv[2])),
                              [=](rdmacm::connection_request r, int n) { return serve(std::move(r), n, count, size); });
}
