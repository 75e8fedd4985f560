// A library thread whose blocking call returns while the process exits. A closed id whose
// blocking call (here, the disconnect of an id still connecting) is still in the kernel is
// destroyed by that call's thread once it returns — maybe after the library's destroyer
// thread was stopped at exit. That late destroy must be let go of, never submitted to a
// destroyer that is gone (before: the destroyer was a static, destroyed at exit, and the late
// submit wrote into its freed queue — AddressSanitizer: heap-use-after-free; in a plain
// build, a thread started on the destroyed object).
//
// Its own executable: the interleaving needs the destroyer made after this test's handler
// is registered at exit (so that it stops before the handler releases the call), which no
// other test of the binary may have done first.
#include "support/faults.hpp"
#include "support/fixture.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <cstdlib>

using namespace rdmacm;
using namespace rdmacm::test;

namespace {

faults::gate* held_until_exit = nullptr;
rdma_cm_id* closed_id = nullptr;

// Runs after the library's destroyer stopped (registered before it was made).
void release_during_exit() {
    if (!held_until_exit) return; // the test failed before holding the call
    held_until_exit->release();
    // The call returns (siw: after its 10 s MPA time-out), and its thread lets go of the id:
    // destroyed there, its destroy refused by the stopped destroyer.
    if (!faults::wait_calls("rdma_destroy_id", closed_id, 1, 30s)) {
        std::fputs("exit_test: the id was never destroyed after its blocking call returned during exit\n", stderr);
        std::_Exit(1);
    }
    std::fputs("exit_test: the call returned during exit, and its id was destroyed\n", stderr);
}

} // namespace

BOOST_AUTO_TEST_CASE(a_blocking_call_returning_during_exit_lets_its_id_go) {
    std::atexit(release_during_exit); // before the library's destroyer is made: runs after its stop
    asio::io_context ctx, unread;     // `unread`: never run, the request never read, the client stays connecting
    {
        event_channel channel(ctx), server_channel(unread);
        listener l(server_channel);
        l.bind(device_endpoint());
        l.listen();
        cm_id id(channel);
        rdma_cm_id* raw = id.native_handle();
        std::optional<error_code> connected;
        async_connect(id, device_endpoint(l.local_endpoint().port()), with_qp(),
                      [&](error_code ec, cm_event) { connected = ec; });
        BOOST_REQUIRE(run_until(
            ctx, [&] { return faults::calls("rdma_connect", raw) == 1 || connected.has_value(); }, 10s));
        run_until(
            ctx, [&] { return connected.has_value(); }, 200ms);
        BOOST_REQUIRE_MESSAGE(!connected, "the connect ended: " << connected->message());
        // A disconnect while connecting is made on a library thread: held there until exit.
        held_until_exit = new faults::gate("rdma_disconnect", raw); // (let go of by the exit)
        id.async_disconnect([](error_code) {});
        BOOST_REQUIRE(held_until_exit->wait_entered(10s));
        closed_id = raw;
        id.close(); // destroyed by the call's thread once the call returns
        l.close();
        run_until(
            ctx, [] { return false; }, 100ms); // (the connect's abort runs)
    }
    BOOST_TEST(!held_until_exit->destroyed_while_held(), "the id destroyed under its call");
    BOOST_TEST(faults::calls("rdma_destroy_id", closed_id) == 0, "the id destroyed under its call");
}
