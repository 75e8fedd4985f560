// Completion channels shared by an execution context's queue pairs (src/verbs/completion_channel.hpp),
// on the kernel CM and a real (soft) device: one channel (one fd) for all of a context's
// queue pairs, each completion still reaching its own; a queue pair moved to another
// context completes after the context it was made on is gone (its CQ still reports to that
// context's channel); and a CQ destroyed while a reader holds one of its events, read and
// not yet counted, is destroyed once the reader goes on (forced: the read held at the
// --wrap layer's gate right after it returned, support/faults.cpp).
#include "support/connection_pair.hpp"
#include "support/faults.hpp"
#include "support/fixture.hpp"
#include "support/open_fds.hpp"
#include "support/threads.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <future>
#include <iostream>

using namespace rdmacm;
using namespace rdmacm::test;

namespace {

// Completion channels (and the device's async event fd) open in this process.
long event_fds() {
    const auto fds = open_fds();
    return std::count_if(fds.begin(), fds.end(),
                         [](const std::string& t) { return t.find("infinibandevent") != std::string::npos; });
}

// `from` sends one byte, `value`, which `to` receives, each on its own executor; the send
// once the receive is posted (siw breaks a connection whose send finds none).
std::future<std::size_t> send_one(queue_pair& from, queue_pair& to, std::byte value) {
    struct buffers {
        std::array<std::byte, 1> out{}, in{};
        memory_region out_mr, in_mr;
        buffers(queue_pair& f, queue_pair& t) : out_mr(f.pd(), out), in_mr(t.pd(), in) {}
    };
    auto b = std::make_shared<buffers>(from, to);
    b->out[0] = value;
    auto received = std::make_shared<std::promise<std::size_t>>();
    auto result = received->get_future();
    asio::post(to.get_executor(), [&from, &to, b, received, value] {
        to.async_receive(b->in_mr, b->in, [b, received, value](error_code ec, std::size_t n) {
            if (ec || b->in[0] != value)
                received->set_exception(std::make_exception_ptr(boost::system::system_error(ec, "receive")));
            else
                received->set_value(n);
        });
        asio::post(from.get_executor(),
                   [&from, b] { from.async_send(b->out_mr, b->out, [b](error_code, std::size_t) {}); });
    });
    return result;
}

// Closes one end of a connection on the thread that runs `ctx` (its queue pair's and id's),
// and waits for it — at most a minute: a close that never runs (a stuck context) or never
// returns ends the test binary, named, since the close still queued refers to this frame.
void close_on(asio::io_context& ctx, std::optional<queue_pair>& qp, std::optional<cm_id>& id) {
    std::promise<void> closed;
    asio::post(ctx, [&] {
        qp.reset();
        id.reset();
        closed.set_value();
    });
    if (closed.get_future().wait_for(60s) == std::future_status::ready) return;
    std::cerr << "close_on: the close did not end within 60 s on its context's thread" << std::endl;
    std::abort();
}

} // namespace

BOOST_FIXTURE_TEST_CASE(a_context_s_queue_pairs_share_one_completion_channel, channel_fixture) {
    auto l = make_listener(*channel);
    std::array<connection_pair, 4> pairs;
    const int channels_before = faults::calls("ibv_create_comp_channel");
    run(ctx, connect_pair(l, *channel, pairs[0]));
    const long fds_with_one = event_fds();
    for (std::size_t i = 1; i < pairs.size(); ++i) run(ctx, connect_pair(l, *channel, pairs[i]));
    // Eight queue pairs (both ends of four connections), one context, one device: one channel.
    BOOST_TEST(faults::calls("ibv_create_comp_channel") - channels_before == 1);
    BOOST_TEST(event_fds() == fds_with_one, "a queue pair after the first opened an fd of its own");

    // Each completion reaches its own queue pair: a byte each way on every connection.
    std::vector<std::future<std::size_t>> got;
    for (std::size_t i = 0; i < pairs.size(); ++i) {
        got.push_back(send_one(*pairs[i].client_qp, *pairs[i].server_qp, std::byte(2 * i)));
        got.push_back(send_one(*pairs[i].server_qp, *pairs[i].client_qp, std::byte(2 * i + 1)));
    }
    BOOST_REQUIRE(run_until(ctx, [&] {
        return std::all_of(got.begin(), got.end(), [](auto& f) { return f.wait_for(0s) == std::future_status::ready; });
    }));
    for (auto& f : got) BOOST_TEST(f.get() == 1u);

    for (auto& p : pairs) {
        p.client_qp.reset();
        p.server_qp.reset();
        p.client.reset();
        p.server.reset();
    }
    BOOST_REQUIRE(wait_out_destroys());
    ctx.restart();
    ctx.run_for(1s); // (the fixture checks that it ran out of work)
    BOOST_TEST(event_fds() == fds_with_one - 1, "the shared channel's fd outlived its queue pairs");
}

// A queue pair made on context A moves to B; A is destroyed; its completions, reported to
// A's channel for good, still reach it on B: B reads that channel too.
BOOST_AUTO_TEST_CASE(a_moved_queue_pair_completes_after_its_first_context_is_gone) {
    context_threads t(2); // 0: server, 1: B; A is run by hand, then destroyed
    {
        event_channel server_ch(t[0]), b(t[1]);
        auto l = make_listener(server_ch);
        connection_pair p;
        {
            asio::io_context ctx_a;
            std::optional<event_channel> a(std::in_place, ctx_a);
            auto accepted = asio::co_spawn(t[0], accept_side(l, p, {}), asio::use_future);
            auto connected = asio::co_spawn(ctx_a, connect_side(*a, l.local_endpoint(), p, {}), asio::use_future);
            BOOST_REQUIRE(run_until(ctx_a, [&] { return connected.wait_for(0s) == std::future_status::ready; }));
            connected.get();
            BOOST_REQUIRE(ready_within(accepted));
            accepted.get();
            std::promise<error_code> moved;
            p.client->async_migrate(b, [&](error_code ec) { moved.set_value(ec); });
            auto done = moved.get_future();
            BOOST_REQUIRE(run_until(ctx_a, [&] { return done.wait_for(0s) == std::future_status::ready; }));
            BOOST_TEST(!done.get());
            BOOST_TEST((p.client_qp->get_executor() == b.get_executor()));
            a.reset();
        } // A's context destroyed: nothing of it runs any more

        for (int round = 0; round < 3; ++round) {
            auto to_client = send_one(*p.server_qp, *p.client_qp, std::byte(round));
            auto to_server = send_one(*p.client_qp, *p.server_qp, std::byte(round + 10));
            BOOST_REQUIRE_MESSAGE(ready_within(to_client, 10s), "the moved queue pair's receive never completed");
            BOOST_TEST(to_client.get() == 1u);
            BOOST_REQUIRE(ready_within(to_server, 10s));
            BOOST_TEST(to_server.get() == 1u);
        }
        close_on(t[1], p.client_qp, p.client);
        close_on(t[0], p.server_qp, p.server);
    }
    t.stop(); // every context runs out of work: nothing of ours is left
}

// A reader has read an event of the client's CQ (the kernel counts it as reported) and has
// not counted it yet, held at the gate; meanwhile the client goes, its receive outstanding.
// Its close puts the queue pair in the error state and waits for the device's flush, which
// that reader's pass brings: the CQ is not destroyed while the reader holds its event. Let
// go, the reader counts the event and its pass hands the receive over; the CQ's destroy, on
// the destroyer thread, then returns (the event acknowledged: an event never acknowledged
// would hold that destroy, and every destroy after it, for good).
BOOST_AUTO_TEST_CASE(a_closed_queue_pair_s_cq_waits_for_the_flush_a_held_event_brings) {
    context_threads t(1);
    {
        event_channel ch(t[0]);
        auto l = make_listener(ch);
        connection_pair p;
        auto connected = asio::co_spawn(t[0], connect_pair(l, ch, p), asio::use_future);
        BOOST_REQUIRE(ready_within(connected));
        connected.get();
        ibv_cq* cq = p.client_qp->native_handle()->recv_cq;
        // (Counted per address: an earlier test's CQ may have lived at this one's.)
        const int destroys_before = faults::calls("ibv_destroy_cq", cq);
        const int returns_before = faults::calls("ibv_destroy_cq returned", cq);

        faults::gate held("ibv_get_cq_event returned", cq);
        auto received = std::make_shared<std::promise<error_code>>();
        auto got = received->get_future();
        {
            auto b = std::make_shared<std::array<std::byte, 1>>();
            auto mr = std::make_shared<memory_region>(p.client_qp->pd(), *b);
            asio::post(t[0], [&, b, mr, received] {
                p.client_qp->async_receive(*mr, *b,
                                           [b, mr, received](error_code ec, std::size_t) { received->set_value(ec); });
            });
        }
        // (Posted after the receive, to the same single-threaded context: runs after it.)
        std::array<std::byte, 1> one{std::byte(7)};
        memory_region one_mr(p.server_qp->pd(), one);
        asio::post(t[0], [&] { p.server_qp->async_send(one_mr, one, [](error_code, std::size_t) {}); });
        BOOST_REQUIRE_MESSAGE(held.wait_entered(), "no reader read the client's CQ event");

        // The client goes while its event is held: its queue pair waits for its flush.
        p.client_qp.reset();
        p.client.reset();
        BOOST_TEST(!faults::wait_calls("ibv_destroy_cq", cq, destroys_before + 1, 200ms),
                   "the CQ was destroyed before its receive was flushed");
        held.release();
        BOOST_TEST(faults::wait_calls("ibv_destroy_cq", cq, destroys_before + 1, 10s),
                   "the closed queue pair's CQ was never destroyed");
        BOOST_TEST(faults::wait_calls("ibv_destroy_cq returned", cq, returns_before + 1, 10s),
                   "the CQ's destroy never returned: its event read was never acknowledged");
        BOOST_REQUIRE(ready_within(got, 10s));
        const error_code ec = got.get(); // received, or aborted by the close: completed once either way
        BOOST_TEST((!ec || ec == asio::error::operation_aborted), ec.message());
        close_on(t[0], p.server_qp, p.server);
    }
    t.stop();
}

// The CQ is destroyed while a reader holds an event of it: the reader of another context.
// The client's queue pair moved from A to B; A still reads the channel its CQ reports to
// (another connection's queue pair stays there). B's thread is kept busy while the server
// sends, so A's reader reads the event, and is held before it counts it. The client goes
// meanwhile: its flush is polled on B (after the grace), and the CQ's destroy begins with
// the event held; ibv_destroy_cq waits for its acknowledgement, which the reader, let go,
// makes at once (cq_events::read, destroying) — not counted for a batch that never comes.
BOOST_AUTO_TEST_CASE(a_cq_destroyed_while_another_context_s_reader_holds_its_event_is_destroyed) {
    context_threads t(3); // 0: server, 1: A, 2: B
    {
        event_channel server_ch(t[0]), a(t[1]), b(t[2]);
        auto l = make_listener(server_ch);
        connection_pair stays, moves;
        for (auto* p : {&stays, &moves}) {
            auto connected = asio::co_spawn(t[0], connect_pair(l, a, *p), asio::use_future);
            BOOST_REQUIRE(ready_within(connected));
            connected.get();
        }
        std::promise<error_code> moved;
        moves.client->async_migrate(b, [&](error_code ec) { moved.set_value(ec); });
        auto move_done = moved.get_future();
        BOOST_REQUIRE(ready_within(move_done, 10s));
        BOOST_REQUIRE(!move_done.get());
        ibv_cq* cq = moves.client_qp->native_handle()->recv_cq;
        const int destroys_before = faults::calls("ibv_destroy_cq", cq);
        const int returns_before = faults::calls("ibv_destroy_cq returned", cq);

        // The receive posted on B, then B's thread kept busy until the event is held.
        auto received = std::make_shared<std::promise<error_code>>();
        auto got = received->get_future();
        // (What the post uses is its own: a failed requirement leaves this frame first.)
        auto posted = std::make_shared<std::promise<void>>();
        std::promise<void> go_on; // (broken when this frame goes: B free then too)
        {
            auto buf = std::make_shared<std::array<std::byte, 1>>();
            auto mr = std::make_shared<memory_region>(moves.client_qp->pd(), *buf);
            asio::post(t[2], [qp = &*moves.client_qp, buf, mr, received, posted, b_free = go_on.get_future().share()] {
                qp->async_receive(*mr, *buf,
                                  [buf, mr, received](error_code ec, std::size_t) { received->set_value(ec); });
                posted->set_value();
                b_free.wait_for(20s);
            });
        }
        faults::gate held("ibv_get_cq_event returned", cq);
        BOOST_REQUIRE(posted->get_future().wait_for(10s) == std::future_status::ready);
        std::array<std::byte, 1> one{std::byte(7)};
        memory_region one_mr(moves.server_qp->pd(), one);
        asio::post(t[0], [&] { moves.server_qp->async_send(one_mr, one, [](error_code, std::size_t) {}); });
        const bool entered = held.wait_entered(); // on A's thread: B's is busy
        moves.client_qp.reset();                  // closed: its flush is B's to poll
        moves.client.reset();
        go_on.set_value();
        BOOST_REQUIRE_MESSAGE(entered, "no reader read the client's CQ event");
        BOOST_TEST(faults::wait_calls("ibv_destroy_cq", cq, destroys_before + 1, 10s),
                   "the CQ's destroy did not begin while another context's reader held its event");
        BOOST_TEST(!faults::wait_calls("ibv_destroy_cq returned", cq, returns_before + 1, 200ms),
                   "the CQ was destroyed with an event read and not acknowledged");
        held.release();
        BOOST_TEST(faults::wait_calls("ibv_destroy_cq returned", cq, returns_before + 1, 10s),
                   "the CQ's destroy never returned: the held event was never acknowledged");
        BOOST_REQUIRE(ready_within(got, 10s));
        const error_code ec = got.get(); // received, or aborted by the close: completed once either way
        BOOST_TEST((!ec || ec == asio::error::operation_aborted), ec.message());
        close_on(t[1], stays.client_qp, stays.client);
        close_on(t[0], stays.server_qp, stays.server);
        close_on(t[0], moves.server_qp, moves.server);
    }
    t.stop();
}

// A polling queue pair moves while its poller spins (a receive outstanding, the queue left
// unarmed while it polls) and nothing completes during the move: the old poller stops, no
// longer current, and the new context's poller polls from the move's end — the next
// completion comes to it. (Before the fix, only held completions gave the new poller a
// first pass: the receive never completed.)
BOOST_AUTO_TEST_CASE(a_queue_pair_moved_while_polling_polls_on_its_new_context) {
    context_threads t(3); // 0: server, 1: A, 2: B
    {
        event_channel server_ch(t[0]), a(t[1]), b(t[2]);
        auto l = make_listener(server_ch);
        connection_pair p;
        queue_pair_options polling;
        polling.poll_for = 10s; // goes on polling for the test's length while a receive waits
        auto accepted = asio::co_spawn(t[0], accept_side(l, p, {}), asio::use_future);
        auto connected = asio::co_spawn(t[1], connect_side(a, l.local_endpoint(), p, polling), asio::use_future);
        BOOST_REQUIRE(ready_within(connected));
        connected.get();
        BOOST_REQUIRE(ready_within(accepted));
        accepted.get();

        // The first receive's completion wakes the client's poller, which then spins: its
        // handler posts the second receive before the pass after it looks.
        std::array<std::byte, 1> first{}, second{}, out{std::byte(1)};
        memory_region first_mr(p.client_qp->pd(), first), second_mr(p.client_qp->pd(), second);
        memory_region out_mr(p.server_qp->pd(), out);
        // (Shared: a failed check leaves with the handlers still to run, on close.)
        auto spinning = std::make_shared<std::promise<void>>();
        auto second_done = std::make_shared<std::promise<error_code>>();
        auto send = [&] {
            asio::post(t[0], [&] { p.server_qp->async_send(out_mr, out, [](error_code, std::size_t) {}); });
        };
        asio::post(t[1], [&] {
            p.client_qp->async_receive(first_mr, first, [&, spinning, second_done](error_code, std::size_t) {
                p.client_qp->async_receive(second_mr, second,
                                           [second_done](error_code ec, std::size_t) { second_done->set_value(ec); });
                spinning->set_value();
            });
            send(); // once the receive is posted
        });
        auto spun = spinning->get_future();
        BOOST_REQUIRE(ready_within(spun, 10s));

        std::promise<error_code> moved;
        p.client->async_migrate(b, [&](error_code ec) { moved.set_value(ec); });
        auto done = moved.get_future();
        BOOST_REQUIRE(ready_within(done, 10s));
        BOOST_TEST(!done.get());

        send();
        auto got = second_done->get_future();
        BOOST_REQUIRE_MESSAGE(ready_within(got, 5s), "the moved queue pair's receive never completed");
        BOOST_TEST(!got.get());

        close_on(t[2], p.client_qp, p.client);
        close_on(t[0], p.server_qp, p.server);
    }
    t.stop();
}
