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

#include <algorithm>
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

using rdmacm::detail::stream_counts;

struct message {
    bool data;            // else credits alone
    std::uint32_t bytes;  // data: written into the receiver's ring before it
    stream_counts counts; // the header's
    friend auto operator<=>(const message&, const message&) = default;
};

struct side {
    stream_credits credits;
    std::uint32_t to_write;            // bytes the writer has still
    std::uint32_t posted;              // receives posted here, all told (the device's view)
    std::uint32_t arrived = 0;         // the peer's messages taken by them
    std::vector<std::uint32_t> unread; // data arrived, not read yet: each message's bytes left
    std::uint32_t ring_used = 0;       // bytes of the ring here arrived and not read
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

// Each side's ring, in bytes (as small as the explorer can afford: a byte stands for many),
// and defects to put back: the reader's bytes told at half a ring larger than the one it
// advertised; a writer that takes no notice of the room left in the peer's ring.
struct rings {
    std::uint32_t client = 4, server = 4;
    std::uint32_t told_as = 0; // (a defect: the ring each reader's credits believe it has)
    bool ignore_room = false;  // (a defect)
};

// Every state reachable from both writers having `writes` bytes each, side 0 (the client)
// keeping `a.depth` receives posted and side 1 (the server) `b.depth`. A writer sends, as
// the stream does, a full message (half the smaller ring) or what it has or what the
// peer's ring has room for, whichever is least — or a single byte, as Nagle's rule or a
// short write may make it.
outcome explore(stream_credit_rules a, stream_credit_rules b, std::uint32_t writes, opening o = {}, rings r = {}) {
    const std::uint32_t credit_bound = 4 * writes + 4 + o.nudges + 2; // far beyond what progress needs
    const std::uint32_t ring[2] = {r.client, r.server};
    const std::uint32_t full = std::max<std::uint32_t>(1, std::min(r.client, r.server) / 2);
    auto told = [&](std::uint32_t actual) { return r.told_as ? r.told_as : actual; };
    outcome out;
    std::set<state> seen;
    std::vector<state> todo;
    state first{{side{stream_credits(a, told(ring[0]), b.depth, ring[1]), writes, a.depth, 0, {}, 0, 0, o.nudges, {}},
                 side{stream_credits(b, told(ring[1]), a.depth, ring[0]),
                      writes,
                      b.depth,
                      0,
                      {},
                      0,
                      0,
                      o.answer ? 1U : 0U,
                      {}}}};
    if (o.hello) first.s[0].wire.push_back({false, 0, first.s[0].credits.sent()});
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
            const std::uint32_t room = r.ignore_room ? ring[j] : me.credits.room();
            const std::uint32_t most = std::min({me.to_write, room, full});
            if (most > 0 && me.credits.may_send_data()) { // the writer sends
                for (std::uint32_t bytes : {most, 1U}) {
                    state n = at;
                    n.s[i].to_write -= bytes;
                    n.s[i].wire.push_back({true, bytes, n.s[i].credits.sent(bytes)});
                    next.push_back(n);
                    if (most == 1) break;
                }
            }
            if (me.extras > 0 && me.credits.may_send_data()) { // the opening's credits alone
                state n = at;
                --n.s[i].extras;
                n.s[i].wire.push_back({false, 0, n.s[i].credits.sent()});
                next.push_back(n);
            }
            if (me.credits.credits_due()) { // credits alone
                state n = at;
                if (++n.s[i].credits_alone > credit_bound) {
                    fail("messages of credits alone without end (more than " + std::to_string(credit_bound) + ")");
                    break;
                }
                out.most_credits_alone = std::max(out.most_credits_alone, n.s[i].credits_alone);
                n.s[i].wire.push_back({false, 0, n.s[i].credits.sent()});
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
                if (here.ring_used + m.bytes > ring[i]) {
                    fail("a write overran bytes of the ring not read yet");
                    break;
                }
                ++here.arrived;
                if (!here.credits.heard(m.counts)) {
                    fail("a count of bytes read beyond those written");
                    break;
                }
                if (m.data) {
                    here.unread.push_back(m.bytes);
                    here.ring_used += m.bytes;
                } else { // taken in at once: its receive is posted again
                    here.credits.reposted();
                    ++here.posted;
                }
                next.push_back(n);
            }
            if (!me.unread.empty()) { // the reader reads a byte; a message read, its receive is posted again
                state n = at;
                side& here = n.s[i];
                --here.ring_used;
                here.credits.consumed(1);
                if (--here.unread.front() == 0) {
                    here.unread.erase(here.unread.begin());
                    here.credits.reposted();
                    ++here.posted;
                }
                next.push_back(n);
            }
        }
        if (out.violation) break;
        if (next.empty()) {
            const bool done = at.s[0].to_write == 0 && at.s[1].to_write == 0 && at.s[0].unread.empty() &&
                              at.s[1].unread.empty() && at.s[0].wire.empty() && at.s[1].wire.empty();
            if (!done) {
                std::ostringstream why;
                why << "stuck with data still to go: writers " << at.s[0].to_write << "/" << at.s[1].to_write
                    << " to send, windows " << at.s[0].credits.window() << "/" << at.s[1].credits.window() << ", rooms "
                    << at.s[0].credits.room() << "/" << at.s[1].credits.room() << ", freed untold "
                    << at.s[0].credits.unadvertised() << "/" << at.s[1].credits.unadvertised() << ", read untold "
                    << at.s[0].credits.unadvertised_bytes() << "/" << at.s[1].credits.unadvertised_bytes();
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
// threshold of half the data window (at least three where the window allows, else two);
// rings from the smallest (2 bytes: messages of one) to ones the writes seldom fill, equal
// and not.
BOOST_AUTO_TEST_CASE(no_interleaving_deadlocks_overruns_or_sends_credits_without_end) {
    for (std::uint32_t depth = 2; depth <= 5; ++depth) {
        const std::uint32_t window = depth - 1;
        const auto rules = stream_credit_rules::for_depth(depth);
        if (rules.threshold > window) continue; // (depth 2: see the next case)
        for (const rings ring : {rings{2, 2}, rings{4, 4}, rings{3, 6}, rings{8, 8}})
            // (bytes each way: beyond twice each ring but 8's, within a few seconds a depth)
            for (std::uint32_t writes : {0U, 1U, 3U, ring.client == 2 ? 7U : 5U}) {
                auto r = explore(rules, rules, writes, {}, ring);
                BOOST_TEST_MESSAGE(name(rules) << ", rings " << ring.client << "/" << ring.server << ", " << writes
                                               << " bytes each way: " << r.states << " states, at most "
                                               << r.most_credits_alone << " messages of credits alone a side");
                BOOST_TEST(!r.violation, name(rules) << ", rings " << ring.client << "/" << ring.server << ", "
                                                     << writes << " bytes: " << r.violation.value_or(""));
            }
    }
}

BOOST_AUTO_TEST_CASE(each_defect_put_back_is_found) {
    struct defect {
        const char* what;
        stream_credit_rules rules;
        rings ring;
        const char* expected;
    };
    const stream_credit_rules ours = stream_credit_rules::for_depth(4);
    for (const auto& d : {
             defect{"no reserve: both windows spent on data", {4, 0, 2}, {}, "stuck"},
             defect{"a threshold of one: each message of credits answers the other's", {4, 1, 1}, {}, "without end"},
             defect{"a threshold beyond the data window: a freed window never told", {4, 1, 4}, {}, "stuck"},
             defect{"bytes told at half a ring larger than the one advertised", ours, {.told_as = 16}, "stuck"},
             defect{"a writer heedless of the room in the peer's ring", ours, {.ignore_room = true}, "overran"},
         }) {
        auto r = explore(d.rules, d.rules, 9, {}, d.ring);
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
        constexpr std::uint32_t ring = 1024, request = 100, response = 300; // (bytes)
        stream_credits client(rules, ring, depth, ring), server(rules, ring, depth, ring);
        std::uint32_t credits_alone = 0;
        // `from` sends its message of credits alone if one is due; `to` takes it in.
        auto credits_if_due = [&](stream_credits& from, stream_credits& to) {
            if (!from.credits_due()) return;
            ++credits_alone;
            to.heard(from.sent());
            to.reposted();
        };
        // `to` reads the data message `from` sent: its bytes, and its receive posted again.
        auto read = [](stream_credits& to, std::uint32_t bytes) {
            to.consumed(bytes);
            to.reposted();
        };
        const stream_counts opening = client.sent();      // the client's first message
        const stream_counts first = client.sent(request); // its first request, right behind it
        server.heard(opening);
        server.reposted();
        client.heard(server.sent()); // the server's answer, as the opening arrives: credits alone
        client.reposted();
        server.heard(first);
        read(server, request);
        for (int turn = 0; turn < 100; ++turn) {
            BOOST_TEST_REQUIRE((server.may_send_data() && server.room() >= response));
            client.heard(server.sent(response)); // the response
            read(client, response);
            credits_if_due(client, server);
            BOOST_TEST_REQUIRE((client.may_send_data() && client.room() >= request));
            server.heard(client.sent(request)); // the next request
            read(server, request);
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
        for (std::uint32_t writes : {0U, 1U, 3U}) {
            const auto a = stream_credit_rules::for_depth(client), b = stream_credit_rules::for_depth(server);
            auto r = explore(a, b, writes, {.hello = true, .nudges = 2, .answer = true});
            BOOST_TEST_MESSAGE("depths " << client << "/" << server << ", " << writes
                                         << " writes each way: " << r.states << " states");
            BOOST_TEST(!r.violation, "depths " << client << "/" << server << ", " << writes
                                               << " writes: " << r.violation.value_or(""));
        }
}
