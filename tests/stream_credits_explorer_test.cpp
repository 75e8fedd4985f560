// The stream's credits (src/stream/stream_credits.hpp) against every interleaving of two
// peers' writers, readers and the wire between them (in order each way, as an RC
// connection is), state by state: a message never finds the peer's receive queue empty (it
// would end an iWARP connection), no state is stuck with data still to go (each writer's
// data sent, each reader's read), and messages of credits alone are not sent back and forth
// without end. Defects put back (no reserve, a threshold of one, a threshold beyond the data
// window) are each found; and a request and its response a turn send no message of credits
// alone. No I/O.
#include "stream/stream_credits.hpp"

#include <boost/test/unit_test.hpp>

#include <compare>
#include <cstdint>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using rdmacm::detail::stream_credit_rules;
using rdmacm::detail::stream_credits;

namespace {

struct message {
    bool data;            // else credits alone
    std::uint32_t posted; // the header's count
    friend auto operator<=>(const message&, const message&) = default;
};

struct side {
    stream_credits credits;
    std::uint32_t to_write;    // data messages the writer has still
    std::uint32_t posted;      // receives posted here, all told (the device's view)
    std::uint32_t arrived = 0; // the peer's messages taken by them
    std::uint32_t unread = 0;  // data arrived, not read yet
    std::uint32_t credits_alone = 0;
    std::uint32_t extras = 0;  // the opening's messages of credits alone still to send (answer, nudges)
    std::vector<message> wire; // sent to the peer, not arrived yet (in order)
    friend auto operator<=>(const side&, const side&) = default;
};

struct state {
    side s[2];
    friend auto operator<=>(const state&, const state&) = default;
};

struct outcome {
    std::size_t states = 0;
    std::uint32_t most_credits_alone = 0;
    std::optional<std::string> violation;
};

// The opening as the stream makes it (docs/stream-protocol.md, "Opening"): the client's
// first message of credits alone on the wire, `nudges` more the client may send, and the
// server's answer — each whenever the window is larger than the reserve, as the stream
// sends them. None: both sides start with nothing sent.
struct opening {
    bool hello = false;
    std::uint32_t nudges = 0;
    bool answer = false;
};

// Every state reachable from both writers having `writes` messages each, side 0 (the
// client) keeping `a.depth` receives posted and side 1 (the server) `b.depth`.
outcome explore(stream_credit_rules a, stream_credit_rules b, std::uint32_t writes, opening o = {}) {
    const std::uint32_t credit_bound = 4 * writes + 4 + o.nudges + 2; // far beyond what progress needs
    outcome out;
    std::set<state> seen;
    std::vector<state> todo;
    state first{{side{stream_credits(a, b.depth), writes, a.depth, 0, 0, 0, o.nudges, {}},
                 side{stream_credits(b, a.depth), writes, b.depth, 0, 0, 0, o.answer ? 1U : 0U, {}}}};
    if (o.hello) first.s[0].wire.push_back({false, first.s[0].credits.sent()});
    todo.push_back(first);
    seen.insert(first);
    auto fail = [&](const std::string& why) {
        if (!out.violation) out.violation = why;
    };
    while (!todo.empty() && !out.violation) {
        state at = todo.back();
        todo.pop_back();
        ++out.states;
        std::vector<state> next;
        for (int i = 0; i < 2; ++i) {
            const int j = 1 - i;
            const side& me = at.s[i];
            if (me.to_write > 0 && me.credits.may_send_data()) { // the writer sends
                state n = at;
                --n.s[i].to_write;
                n.s[i].wire.push_back({true, n.s[i].credits.sent()});
                next.push_back(n);
            }
            if (me.extras > 0 && me.credits.may_send_data()) { // the opening's credits alone
                state n = at;
                --n.s[i].extras;
                n.s[i].wire.push_back({false, n.s[i].credits.sent()});
                next.push_back(n);
            }
            if (me.credits.credits_due()) { // credits alone
                state n = at;
                if (++n.s[i].credits_alone > credit_bound) {
                    fail("messages of credits alone without end (more than " + std::to_string(credit_bound) + ")");
                    break;
                }
                out.most_credits_alone = std::max(out.most_credits_alone, n.s[i].credits_alone);
                n.s[i].wire.push_back({false, n.s[i].credits.sent()});
                next.push_back(n);
            }
            if (!at.s[j].wire.empty()) { // the peer's next message arrives here
                state n = at;
                side& here = n.s[i];
                const message m = n.s[j].wire.front();
                n.s[j].wire.erase(n.s[j].wire.begin());
                if (here.posted == here.arrived) {
                    fail("a message arrived with no receive posted (an iWARP connection ends)");
                    break;
                }
                ++here.arrived;
                here.credits.heard(m.posted);
                if (m.data) {
                    ++here.unread;
                } else { // taken in at once: its receive is posted again
                    here.credits.reposted();
                    ++here.posted;
                }
                next.push_back(n);
            }
            if (me.unread > 0) { // the reader reads one: its receive is posted again
                state n = at;
                --n.s[i].unread;
                n.s[i].credits.reposted();
                ++n.s[i].posted;
                next.push_back(n);
            }
        }
        if (out.violation) break;
        if (next.empty()) {
            const bool done = at.s[0].to_write == 0 && at.s[1].to_write == 0 && at.s[0].unread == 0 &&
                              at.s[1].unread == 0 && at.s[0].wire.empty() && at.s[1].wire.empty();
            if (!done) {
                std::ostringstream why;
                why << "stuck with data still to go: writers " << at.s[0].to_write << "/" << at.s[1].to_write
                    << " to send, windows " << at.s[0].credits.window() << "/" << at.s[1].credits.window()
                    << ", freed untold " << at.s[0].credits.unadvertised() << "/" << at.s[1].credits.unadvertised();
                fail(why.str());
            }
        }
        for (auto& n : next)
            if (seen.insert(n).second) todo.push_back(std::move(n));
    }
    return out;
}

std::string name(stream_credit_rules r) {
    return "depth " + std::to_string(r.depth) + ", reserve " + std::to_string(r.reserve) + ", threshold " +
           std::to_string(r.threshold);
}

} // namespace

// The rules the stream uses, and every depth from 2 to 5 with them: a reserve of one, a
// threshold of half the data window (at least three where the window allows, else two).
BOOST_AUTO_TEST_CASE(no_interleaving_deadlocks_overruns_or_sends_credits_without_end) {
    for (std::uint32_t depth = 2; depth <= 5; ++depth) {
        const std::uint32_t window = depth - 1;
        const auto rules = stream_credit_rules::for_depth(depth);
        if (rules.threshold > window) continue;         // (depth 2: see the next case)
        for (std::uint32_t writes : {0U, 1U, 3U, 7U}) { // (7: beyond twice every depth's data window but 5's)
            auto r = explore(rules, rules, writes);
            BOOST_TEST_MESSAGE(name(rules) << ", " << writes << " writes each way: " << r.states << " states, at most "
                                           << r.most_credits_alone << " messages of credits alone a side");
            BOOST_TEST(!r.violation, name(rules) << ", " << writes << " writes: " << r.violation.value_or(""));
        }
    }
}

BOOST_AUTO_TEST_CASE(each_defect_put_back_is_found) {
    struct defect {
        const char* what;
        stream_credit_rules rules;
        const char* expected;
    };
    for (const auto& d : {
             defect{"no reserve: both windows spent on data", {4, 0, 2}, "stuck"},
             defect{"a threshold of one: each message of credits answers the other's", {4, 1, 1}, "without end"},
             defect{"a threshold beyond the data window: a freed window never told", {4, 1, 4}, "stuck"},
         }) {
        auto r = explore(d.rules, d.rules, 9);
        BOOST_TEST_MESSAGE(d.what << ": " << r.violation.value_or("none found") << " (" << r.states << " states)");
        BOOST_TEST((r.violation && r.violation->find(d.expected) != std::string::npos),
                   d.what << ": expected \"" << d.expected << "\", got " << r.violation.value_or("none"));
    }
}

// What the stream's rules cost a request and its response: two sides taking turns, each
// reading the other's message, then writing one. After the opening — the client's message
// of credits alone, answered by the server as it arrives, then the client's first request
// — no message of credits alone goes: each side's data tells of its freed receives. A
// side takes in two messages a turn once its peer sends credits alone (the peer's data and
// its credits): at a threshold of two those make the next due, and each side answers the
// other's every turn, twice the messages (depth 4 did, before its threshold was three).
// Depth 3, the least, cannot help it: its window of two is told at two.
BOOST_AUTO_TEST_CASE(a_request_and_its_response_each_turn_send_no_credits_alone) {
    for (std::uint32_t depth = 4; depth <= 16; ++depth) {
        const auto rules = stream_credit_rules::for_depth(depth);
        stream_credits client(rules, depth), server(rules, depth);
        std::uint32_t credits_alone = 0;
        // `from` sends its message of credits alone if one is due; `to` takes it in.
        auto credits_if_due = [&](stream_credits& from, stream_credits& to) {
            if (!from.credits_due()) return;
            ++credits_alone;
            to.heard(from.sent());
            to.reposted();
        };
        const std::uint32_t opening = client.sent(); // the client's first message
        const std::uint32_t first = client.sent();   // its first request, right behind it
        server.heard(opening);
        server.reposted();
        client.heard(server.sent()); // the server's answer, as the opening arrives: credits alone
        client.reposted();
        server.heard(first);
        server.reposted(); // (read)
        for (int turn = 0; turn < 100; ++turn) {
            BOOST_TEST_REQUIRE(server.may_send_data());
            client.heard(server.sent()); // the response
            client.reposted();
            credits_if_due(client, server);
            BOOST_TEST_REQUIRE(client.may_send_data());
            server.heard(client.sent()); // the next request
            server.reposted();
            credits_if_due(server, client);
        }
        BOOST_TEST(credits_alone == 0,
                   "depth " << depth << ": " << credits_alone << " messages of credits alone in 100 turns");
    }
}

// The stream as it opens: sides of different depths, the client's first message, its
// nudges and the server's answer on top of the rules' own messages.
BOOST_AUTO_TEST_CASE(unequal_depths_and_the_opening_s_messages) {
    const std::pair<std::uint32_t, std::uint32_t> depths[] = {{3, 5}, {5, 3}, {3, 4}, {4, 3}};
    for (const auto& [client, server] : depths)
        for (std::uint32_t writes : {0U, 1U, 4U}) {
            const auto a = stream_credit_rules::for_depth(client), b = stream_credit_rules::for_depth(server);
            auto r = explore(a, b, writes, {.hello = true, .nudges = 2, .answer = true});
            BOOST_TEST_MESSAGE("depths " << client << "/" << server << ", " << writes
                                         << " writes each way: " << r.states << " states");
            BOOST_TEST(!r.violation, "depths " << client << "/" << server << ", " << writes
                                               << " writes: " << r.violation.value_or(""));
        }
}
