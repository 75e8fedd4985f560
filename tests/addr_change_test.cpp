// ADDR_CHANGE surfaced: the kernel's CM (Linux 6.1) raises it for the ids on a bonding
// master whose hardware address changes on failover — neither adding nor removing an IP
// address raises it. So the test makes its own device: an active-backup bond of two
// dummy netdevs (fail_over_mac=active), Soft-RoCE on it, a connection over it; then the
// active slave changes, and each id of the connection and the listener reads ADDR_CHANGE
// through async_next_event; a new connection over the bond then carries data. Destructive:
// runs only where RDMACM_TEST_DESTRUCTIVE=1 (the throw-away VM of tools/rdma-vm).
#include "support/connection_pair.hpp"
#include "support/fixture.hpp"

#include <cstdlib>
#include <iostream>

using namespace rdmacm;
using namespace rdmacm::test;
using asio::awaitable;
using asio::use_awaitable;

namespace {

const char* const bond_address = "169.254.79.1";

// The bond and its rxe device, made once per machine (kept: removing rxe would wait for
// this process, which holds librdmacm's context of it).
bool make_bond_device() {
    return std::system("set -e; [ -e /sys/class/infiniband/rxebond0 ] && exit 0\n"
                       "modprobe bonding\n"
                       "ip link add rdmabond0 type bond mode active-backup fail_over_mac active miimon 0\n"
                       "for s in 1 2; do ip link add rdmaslave$s address 02:00:00:00:79:0$s type dummy;"
                       " ip link set rdmaslave$s master rdmabond0; done\n"
                       "ip link set rdmabond0 up\n"
                       "ip addr add 169.254.79.1/24 dev rdmabond0\n"
                       "rdma link add rxebond0 type rxe netdev rdmabond0\n"
                       "for i in $(seq 100); do grep -q ACTIVE /sys/class/infiniband/rxebond0/ports/1/state && exit 0;"
                       " sleep 0.1; done; exit 1") == 0;
}

// Makes the other slave the active one: the bond's hardware address changes.
bool fail_over() {
    return std::system("cd /sys/class/net/rdmabond0/bonding && read a <active_slave && "
                       "if [ $a = rdmaslave1 ]; then echo rdmaslave2; else echo rdmaslave1; fi >active_slave") == 0;
}

} // namespace

BOOST_FIXTURE_TEST_CASE(bond_failover_raises_addr_change_on_every_id_over_it, channel_fixture) {
    if (!destructive_tests_enabled()) return;
    BOOST_REQUIRE_MESSAGE(make_bond_device(), "could not make the bond and its rxe device");
    listener l(*channel);
    l.bind(endpoint(asio::ip::make_address(bond_address), 0));
    l.listen();
    connection_pair p;
    run(ctx, connect_pair(l, *channel, p));

    std::array<std::optional<cm_event>, 3> seen; // client, server, listener
    auto wait_on = [&](auto& id, std::size_t i) {
        id.async_next_event([&, i](error_code ec, cm_event ev) {
            BOOST_TEST(!ec);
            seen[i] = ev;
        });
    };
    wait_on(*p.client, 0);
    wait_on(*p.server, 1);
    wait_on(l, 2);
    BOOST_REQUIRE(fail_over());
    run_until(
        ctx, [&] { return seen[0] && seen[1] && seen[2]; }, 10s);
    for (std::size_t i = 0; i < seen.size(); ++i) {
        const char* const names[] = {"client", "server", "listener"};
        BOOST_TEST_CONTEXT(names[i]) {
            BOOST_TEST_REQUIRE(seen[i].has_value());
            BOOST_TEST(seen[i]->type() == RDMA_CM_EVENT_ADDR_CHANGE, to_string(seen[i]->type()));
        }
    }
    // What ADDR_CHANGE asks for: the connection's path (here the hardware address it was
    // set up with) is stale, so the user reconnects — and the new connection carries data.
    p.client_qp.reset(), p.server_qp.reset();
    p.client.reset(), p.server.reset();
    connection_pair again;
    run(ctx, connect_pair(l, *channel, again));
    std::vector<std::byte> cbuf(64), sbuf(64);
    memory_region cmr(again.client_qp->pd(), cbuf), smr(again.server_qp->pd(), sbuf);
    run(ctx, [&]() -> awaitable<void> {
        using namespace asio::experimental::awaitable_operators;
        auto [got, sent] = co_await (again.server_qp->async_receive(smr, sbuf, use_awaitable) &&
                                     again.client_qp->async_send(cmr, std::span(cbuf).first(16), use_awaitable));
        BOOST_TEST(got == 16U);
        BOOST_TEST(sent == 16U);
    }());
}
