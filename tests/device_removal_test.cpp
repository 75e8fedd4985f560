// An RDMA device removed under live connections (`rdma link delete`): every id on it gets
// DEVICE_REMOVAL, every operation waiting on it fails (errc::device_removed, or a flushed
// work completion), the user closes its ids — and the kernel's removal, which waits until
// librdmacm has closed its context of the device, completes. The device is then added back
// and takes connections again. Destructive: runs only where RDMACM_TEST_DESTRUCTIVE=1 (the
// throw-away VM of tools/rdma-vm), and only on soft devices (rxe, siw), which it can re-add.
#include "support/connection_pair.hpp"
#include "support/fixture.hpp"

#include <boost/asio/as_tuple.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <future>
#include <iostream>
#include <thread>

using namespace rdmacm;
using namespace rdmacm::test;
using asio::awaitable;
using asio::use_awaitable;

namespace {

struct soft_device {
    std::string name, type, netdev;
};

// The test device, if it is a soft one: its type and netdev, from `rdma link show`.
std::optional<soft_device> removable_device() {
    soft_device d{test_device().name, test_device().name.substr(0, 3), {}};
    if (d.type != "rxe" && d.type != "siw") return std::nullopt;
    std::string cmd = "rdma link show " + d.name + "/1";
    std::FILE* out = ::popen(cmd.c_str(), "r");
    if (!out) return std::nullopt;
    std::array<char, 512> line{};
    std::string text;
    while (std::fgets(line.data(), line.size(), out)) text += line.data();
    ::pclose(out);
    auto at = text.find(" netdev ");
    if (at == std::string::npos) return std::nullopt;
    std::istringstream(text.substr(at + 8)) >> d.netdev;
    return d;
}

bool port_active(const std::string& dev) {
    std::ifstream state("/sys/class/infiniband/" + dev + "/ports/1/state");
    std::string s;
    std::getline(state, s);
    return s.find("ACTIVE") != std::string::npos;
}

} // namespace

BOOST_FIXTURE_TEST_CASE(removed_device_fails_everything_on_it_and_is_let_go, channel_fixture) {
    if (!destructive_tests_enabled()) return;
    auto dev = removable_device();
    BOOST_REQUIRE_MESSAGE(dev, "cannot tell the type and netdev of " << test_device().name);

    std::future<int> removal;
    {
        auto l = make_listener(*channel);
        connection_pair p;
        run(ctx, connect_pair(l, *channel, p));
        std::vector<std::byte> cbuf(256), sbuf(256);
        memory_region cmr(p.client_qp->pd(), cbuf), smr(p.server_qp->pd(), sbuf);

        // What waits on the device when it goes: a receive on each side, each id's next
        // event, the listener's next connection request.
        int done = 0;
        error_code client_rx, server_rx, accept_ec;
        std::vector<cm_event> client_events, server_events;
        p.client_qp->async_receive(cmr, cbuf, [&](error_code ec, std::size_t) { client_rx = ec, ++done; });
        p.server_qp->async_receive(smr, sbuf, [&](error_code ec, std::size_t) { server_rx = ec, ++done; });
        l.async_get_request([&](error_code ec, connection_request) { accept_ec = ec, ++done; });
        auto until_removal = [&](cm_id& id, std::vector<cm_event>& seen) -> awaitable<void> {
            do {
                seen.push_back(co_await id.async_next_event(use_awaitable));
            } while (seen.back().type() != RDMA_CM_EVENT_DEVICE_REMOVAL);
        };
        auto count = [&](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
            ++done;
        };
        asio::co_spawn(ctx, until_removal(*p.client, client_events), count);
        asio::co_spawn(ctx, until_removal(*p.server, server_events), count);

        removal =
            std::async(std::launch::async, [&] { return std::system(("rdma link delete " + dev->name).c_str()); });
        BOOST_TEST_REQUIRE(run_until(
            ctx, [&] { return done == 5; }, 20s));
        BOOST_TEST(accept_ec == make_error_code(errc::device_removed));
        BOOST_TEST(client_rx == error_code(IBV_WC_WR_FLUSH_ERR, work_completion_category()), client_rx.message());
        BOOST_TEST(server_rx == error_code(IBV_WC_WR_FLUSH_ERR, work_completion_category()), server_rx.message());
        // A further operation on an id of the removed device fails at once, clearly.
        run(ctx, [&]() -> awaitable<void> {
            auto [ec] = co_await p.client->async_disconnect(asio::as_tuple(use_awaitable));
            BOOST_TEST(ec == make_error_code(errc::device_removed));
        }());
    } // the user closes what it had on the device: memory regions, queue pairs, ids
    // The kernel lets the device go once librdmacm has closed its context (bounded: if it
    // never does, the removal waits for this process, so the test ends it at once).
    bool removed = false;
    for (int i = 0; i < 200 && !removed; ++i) {
        ctx.run_for(100ms);
        removed = removal.wait_for(0s) == std::future_status::ready;
    }
    if (!removed) {
        std::cerr << "FAIL: `rdma link delete " << dev->name << "` still waits 20 s after every id was closed\n";
        std::_Exit(1);
    }
    BOOST_TEST(removal.get() == 0);

    // Back, and usable again through the same channel.
    BOOST_REQUIRE(
        std::system(("rdma link add " + dev->name + " type " + dev->type + " netdev " + dev->netdev).c_str()) == 0);
    for (int i = 0; i < 100 && !port_active(dev->name); ++i) std::this_thread::sleep_for(100ms);
    BOOST_REQUIRE(port_active(dev->name));
    auto l = make_listener(*channel);
    connection_pair p;
    run(ctx, connect_pair(l, *channel, p));
}
