// cm_events_bench ADDRESS [IDS] [ROUNDS]: CM events per second through an
// rdmacm::event_channel vs a raw non-blocking rdma_get_cm_event loop, on the same events.
//
// Each round creates IDS ids on a fresh channel, then times from the first of IDS
// rdma_resolve_addr calls (to ADDRESS, a local RDMA address: the kernel answers at once;
// made the same way in both modes) until every ADDR_RESOLVED has been delivered: by the raw
// loop (poll, get, ack), or through the library's channel (reader, copy, ack, route, and
// the completion handler of an async_next_event waiting on each id). Rounds alternate;
// medians are compared. Prints both rates and ours/raw.
#include "costs.hpp"
#include "rounds.hpp"

#include <rdmacm/rdmacm.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>

#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

double raw_round(const rdmacm::endpoint& dst, int ids, bench::costs::phase* cost) {
    rdma_event_channel* ch = rdma_create_event_channel();
    if (!ch) throw std::runtime_error("rdma_create_event_channel failed");
    fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
    std::vector<rdma_cm_id*> v(static_cast<std::size_t>(ids));
    for (auto& id : v)
        if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP)) throw std::runtime_error("rdma_create_id failed");
    auto start = clock_type::now();
    if (cost) cost->begin();
    for (auto* id : v)
        if (rdma_resolve_addr(id, nullptr, const_cast<sockaddr*>(dst.data()), 5000))
            throw std::runtime_error("rdma_resolve_addr failed");
    int got = 0;
    while (got < ids) {
        pollfd p{ch->fd, POLLIN, 0};
        ::poll(&p, 1, 5000);
        rdma_cm_event* ev;
        while (rdma_get_cm_event(ch, &ev) == 0) {
            if (ev->event != RDMA_CM_EVENT_ADDR_RESOLVED) throw std::runtime_error("unexpected event");
            rdma_ack_cm_event(ev);
            ++got;
        }
    }
    if (cost) cost->end(static_cast<std::uint64_t>(ids));
    double t = seconds_since(start);
    for (auto* id : v) rdma_destroy_id(id);
    rdma_destroy_event_channel(ch);
    return ids / t;
}

double library_round(const rdmacm::endpoint& dst, int ids, bench::costs::phase& cost) {
    asio::io_context ctx;
    double rate = 0;
    {
        rdmacm::event_channel channel(ctx);
        std::vector<rdmacm::cm_id> v;
        v.reserve(static_cast<std::size_t>(ids));
        for (int i = 0; i < ids; ++i) v.emplace_back(channel);
        int got = 0;
        for (auto& id : v)
            id.async_next_event([&](rdmacm::error_code ec, rdmacm::cm_event ev) {
                if (ec || ev.type() != RDMA_CM_EVENT_ADDR_RESOLVED) throw std::runtime_error("unexpected event");
                ++got;
            });
        auto start = clock_type::now();
        cost.begin();
        for (auto& id : v)
            if (rdma_resolve_addr(id.native_handle(), nullptr, const_cast<sockaddr*>(dst.data()), 5000))
                throw std::runtime_error("rdma_resolve_addr failed");
        while (got < ids) ctx.run_one();
        cost.end(static_cast<std::uint64_t>(ids));
        rate = ids / seconds_since(start);
    }
    ctx.run_for(30s); // ids destroyed, channel gone
    return rate;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: cm_events_bench ADDRESS [IDS] [ROUNDS]\n");
        return 2;
    }
    bench::costs::start();
    rdmacm::endpoint dst(asio::ip::make_address(argv[1]), 7471);
    int ids = argc > 2 ? std::atoi(argv[2]) : 1000;
    int rounds = argc > 3 ? std::atoi(argv[3]) : 7;
    bench::round_figures raw, ours, ratio;
    bench::costs::phase raw_cost("raw"), our_cost("event_channel");
    raw_round(dst, ids, nullptr); // warm-up: device opened, caches filled
    for (int r = 0; r < rounds; ++r) {
        const double raw_rate = raw_round(dst, ids, &raw_cost), our_rate = library_round(dst, ids, our_cost);
        raw.add(raw_rate);
        ours.add(our_rate);
        ratio.add(our_rate / raw_rate);
    }
    std::printf("CM events/s, %d ADDR_RESOLVED per round, median of %d rounds\n", ids, rounds);
    std::printf("  raw rdma_get_cm_event loop : %10.0f\n", raw.median());
    std::printf("  rdmacm::event_channel      : %10.0f\n", ours.median());
    std::printf("  ratio ours/raw, per round  : ");
    ratio.print();
    std::printf("\n");
    raw_cost.print();
    our_cost.print();
}
