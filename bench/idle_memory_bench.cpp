// idle_memory_bench ADDRESS N raw|ids|ours|defaults: what N idle established connections
// cost a client process, made through raw librdmacm, through rdmacm's cm_id with
// librdmacm's own queue pair and CQs (`ids`: the id's share), or through rdmacm's cm_id and
// queue_pair (64 send and 64 receive work requests each; `ours`: one buffer per work
// request, as the raw run's; `defaults`: queue_pair_options' defaults, four). The server is
// the same in both (rdmacm's listener, accepting with a queue pair of the same size), so
// the difference of two runs is the client side's. Prints, per connection, what RSS, its
// anonymous part, the heap in use and the open fds grew by with the connections up;
// bench/idle_memory.sh runs both and prints the library's cost beyond raw librdmacm's.
#include <rdmacm/rdmacm.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <dirent.h>
#include <malloc.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

constexpr std::uint32_t depth = 64;

// A line of /proc/self/smaps_rollup, in KiB ("Rss", "Anonymous"): counted from the page
// tables. (/proc/self/status's VmRSS comes from per-thread counters synced now and then:
// it moved by 14 MiB between two runs whose mappings smaps found equal.)
long rollup_kib(const std::string& key) {
    std::ifstream f("/proc/self/smaps_rollup");
    for (std::string line; std::getline(f, line);)
        if (line.rfind(key + ":", 0) == 0) return std::stol(line.substr(key.size() + 1));
    return -1;
}
long rss_kib() { return rollup_kib("Rss"); }

long heap_kib() { return static_cast<long>(::mallinfo2().uordblks / 1024); }

int open_fds() {
    int n = 0;
    if (DIR* d = ::opendir("/proc/self/fd")) {
        while (::readdir(d)) ++n;
        ::closedir(d);
    }
    return n - 3; // ".", ".." and the directory's own fd
}

// Connection requests a listener holds at once (the kernel's rdma_ucm max_backlog: 1,024 by
// default): clients connect in batches no larger.
constexpr int batch = 512;

// N clients through raw librdmacm, one event channel, driven to ESTABLISHED in batches.
std::vector<rdma_cm_id*> raw_clients(const rdmacm::endpoint& server, int n) {
    rdma_event_channel* ch = rdma_create_event_channel();
    if (!ch) throw std::runtime_error("rdma_create_event_channel");
    std::vector<rdma_cm_id*> ids(static_cast<std::size_t>(n));
    for (int first = 0; first < n; first += batch) {
        const int last = std::min(n, first + batch);
        for (int i = first; i < last; ++i) {
            auto& id = ids[static_cast<std::size_t>(i)];
            if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP)) throw std::runtime_error("rdma_create_id");
            if (rdma_resolve_addr(id, nullptr, const_cast<sockaddr*>(server.data()), 5000))
                throw std::runtime_error("rdma_resolve_addr");
        }
        for (int established = first; established < last;) {
            rdma_cm_event* ev;
            if (rdma_get_cm_event(ch, &ev)) throw std::runtime_error("rdma_get_cm_event");
            rdma_cm_id* id = ev->id;
            const auto type = ev->event;
            rdma_ack_cm_event(ev);
            if (type == RDMA_CM_EVENT_ADDR_RESOLVED) {
                if (rdma_resolve_route(id, 5000)) throw std::runtime_error("rdma_resolve_route");
            } else if (type == RDMA_CM_EVENT_ROUTE_RESOLVED) {
                ibv_qp_init_attr attr = rdmacm::rc_qp_init_attr(depth); // librdmacm makes the CQ and its channel
                if (rdma_create_qp(id, nullptr, &attr)) throw std::runtime_error("rdma_create_qp");
                rdma_conn_param p{};
                if (rdma_connect(id, &p)) throw std::runtime_error("rdma_connect");
            } else if (type == RDMA_CM_EVENT_ESTABLISHED) {
                ++established;
            } else {
                throw std::runtime_error(std::string("unexpected event ") + rdma_event_str(type));
            }
        }
    }
    return ids;
}

} // namespace

int main(int argc, char** argv) {
    const std::string mode = argc == 4 ? argv[3] : "";
    if (mode != "raw" && mode != "ids" && mode != "ours" && mode != "defaults") {
        std::fprintf(stderr, "usage: idle_memory_bench ADDRESS N raw|ids|ours|defaults\n");
        return 2;
    }
    const auto address = asio::ip::make_address(argv[1]);
    const int n = std::atoi(argv[2]);
    const bool raw = mode == "raw";

    // The server, on a thread of its own: accepts every connection with a queue pair.
    asio::io_context server_ctx;
    rdmacm::event_channel server_channel(server_ctx);
    rdmacm::listener l(server_channel);
    l.bind({address, 0});
    l.listen(1024);
    std::vector<std::unique_ptr<rdmacm::cm_id>> accepted;
    std::vector<std::unique_ptr<rdmacm::queue_pair>> server_qps;
    asio::co_spawn(
        server_ctx,
        [&]() -> asio::awaitable<void> {
            for (int i = 0; i < n; ++i) {
                auto req = co_await l.async_get_request(asio::use_awaitable);
                auto id = std::make_unique<rdmacm::cm_id>(std::move(req.id));
                server_qps.push_back(std::make_unique<rdmacm::queue_pair>(*id));
                co_await id->async_accept({}, asio::use_awaitable);
                accepted.push_back(std::move(id));
            }
        },
        asio::detached);
    std::thread server([&] { server_ctx.run_for(900s); });
    const rdmacm::endpoint to{address, l.local_endpoint().port()};

    const long rss_before = rss_kib(), heap_before = heap_kib(), anon_before = rollup_kib("Anonymous");
    const int fds_before = open_fds();
    long rss_up = 0, heap_up = 0, anon_up = 0;
    int fds_up = 0;
    std::vector<rdma_cm_id*> raw_ids;
    asio::io_context ctx;
    {
        rdmacm::event_channel channel(ctx);
        std::vector<rdmacm::cm_id> ids;
        std::vector<rdmacm::queue_pair> qps;
        if (raw) {
            raw_ids = raw_clients(to, n);
        } else {
            ids.reserve(static_cast<std::size_t>(n));
            qps.reserve(static_cast<std::size_t>(n));
            int established = 0;
            const auto deadline = std::chrono::steady_clock::now() + 600s;
            for (int i = 0; i < n; ++i) {
                if (i % batch == 0) // the previous batch established first
                    while (established < i && std::chrono::steady_clock::now() < deadline) ctx.run_one_for(10ms);
                auto& id = ids.emplace_back(channel);
                asio::co_spawn(
                    ctx,
                    [&]() -> asio::awaitable<void> {
                        co_await id.async_resolve_address(to, 5s, asio::use_awaitable);
                        co_await id.async_resolve_route(5s, asio::use_awaitable);
                        if (mode == "ours") {
                            qps.emplace_back(id, rdmacm::queue_pair_options{.max_send_wr = depth,
                                                                            .max_recv_wr = depth,
                                                                            .max_send_sge = 1,
                                                                            .max_recv_sge = 1});
                        } else if (mode == "defaults") {
                            qps.emplace_back(id,
                                             rdmacm::queue_pair_options{.max_send_wr = depth, .max_recv_wr = depth});
                        } else {
                            ibv_qp_init_attr attr = rdmacm::rc_qp_init_attr(depth); // as raw
                            id.create_qp(attr);
                        }
                        co_await id.async_connect({}, asio::use_awaitable);
                        ++established;
                    },
                    [](const std::exception_ptr& e) {
                        if (e) std::rethrow_exception(e);
                    });
            }
            while (established < n && std::chrono::steady_clock::now() < deadline) ctx.run_one_for(10ms);
            if (established < n) throw std::runtime_error("timed out connecting");
        }
        ctx.run_for(200ms); // idle: what a connection holds between messages
        rss_up = rss_kib();
        heap_up = heap_kib();
        anon_up = rollup_kib("Anonymous");
        fds_up = open_fds();
        for (auto* id : raw_ids) {
            rdma_disconnect(id);
            rdma_destroy_qp(id);
            rdma_destroy_id(id);
        }
    }
    server_ctx.stop();
    server.join();
    // Per connection, client and server side together (the server's is the same in both):
    // RSS (most of it the device's queues mapped from /dev/infiniband), anonymous RSS, heap
    // in use (malloc's, every arena), open fds.
    const auto per = [n](long kib) { return static_cast<double>(kib) * 1024 / n; };
    std::printf("idle %s %d: rss %.0f anon %.0f heap %.0f fds %.2f (bytes per connection; fds per connection)\n",
                argv[3], n, per(rss_up - rss_before), per(anon_up - anon_before), per(heap_up - heap_before),
                static_cast<double>(fds_up - fds_before) / n);
    std::fflush(stdout);
    std::_Exit(0); // teardown is not what is measured (and the server's ids are many)
}
