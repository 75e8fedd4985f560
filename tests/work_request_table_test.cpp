// work_request_table without a device: ids find their handlers once, a late id never
// matches a reused slot, what is left comes out in posting order, slots are reused.
#include "verbs/work_request_table.hpp"

#include <boost/test/unit_test.hpp>

#include <memory>
#include <string>

using rdmacm::detail::work_request_table;

// Move-only, as the queue pair's handlers are.
using handler = std::unique_ptr<std::string>;

namespace {
handler make(const char* s) { return std::make_unique<std::string>(s); }
} // namespace

BOOST_AUTO_TEST_CASE(an_id_finds_its_handler_once) {
    work_request_table<handler> t;
    const auto a = t.insert(make("a")), b = t.insert(make("b"));
    BOOST_TEST(a != 0u);
    BOOST_TEST(a != b);
    BOOST_TEST(t.size() == 2u);
    auto got = t.take(b);
    BOOST_REQUIRE(got.has_value());
    BOOST_TEST(**got == "b");
    BOOST_TEST(!t.take(b).has_value()); // taken already
    BOOST_TEST(!t.contains(b));
    BOOST_TEST(t.contains(a));
    BOOST_TEST(!t.take(0).has_value());
    BOOST_TEST(!t.take(~std::uint64_t{0}).has_value());
}

BOOST_AUTO_TEST_CASE(a_late_id_never_matches_the_slots_next_user) {
    work_request_table<handler> t;
    const auto first = t.insert(make("first"));
    BOOST_REQUIRE(t.take(first));
    const auto second = t.insert(make("second")); // the same slot, reused
    BOOST_TEST(second != first);
    BOOST_TEST(!t.contains(first)); // a cancellation of `first` that comes late finds nothing
    BOOST_TEST(!t.take(first).has_value());
    BOOST_TEST(**t.take(second) == "second");
}

// Taken while the queue pair is in error, never posted: each goes once every handler
// posted before it has gone, not before.
BOOST_AUTO_TEST_CASE(an_unposted_handler_comes_out_in_its_turn) {
    work_request_table<handler> t;
    BOOST_TEST(!t.take_oldest_unposted().has_value()); // none at all
    const auto a = t.insert(make("a"));
    const auto b = t.insert(make("b"), false), c = t.insert(make("c"), false);
    BOOST_TEST(!t.take_oldest_unposted().has_value()); // a, on the device, goes first
    BOOST_REQUIRE(t.take(a));
    auto first = t.take_oldest_unposted();
    BOOST_REQUIRE(first.has_value());
    BOOST_TEST(first->first == b);
    BOOST_TEST(*first->second == "b");
    const auto d = t.insert(make("d")); // (reuses a's slot: below c's, yet younger)
    auto second = t.take_oldest_unposted();
    BOOST_REQUIRE(second.has_value());
    BOOST_TEST(second->first == c);
    BOOST_TEST(!t.take_oldest_unposted().has_value()); // d is on the device
    BOOST_TEST(t.size() == 1u);
    BOOST_TEST(t.contains(d));
}

BOOST_AUTO_TEST_CASE(what_is_left_comes_out_in_posting_order) {
    work_request_table<handler> t;
    std::uint64_t ids[5];
    const char* names[] = {"0", "1", "2", "3", "4"};
    for (int i = 0; i < 3; ++i) ids[i] = t.insert(make(names[i]));
    t.take(ids[0]); // a free slot below the others: reused by the next post
    ids[3] = t.insert(make(names[3]));
    ids[4] = t.insert(make(names[4]));
    auto all = t.take_all();
    BOOST_REQUIRE(all.size() == 4u);
    const int order[] = {1, 2, 3, 4};
    for (std::size_t i = 0; i < all.size(); ++i) {
        BOOST_TEST(all[i].first == ids[order[i]]);
        BOOST_TEST(*all[i].second == names[order[i]]);
    }
    BOOST_TEST(t.empty());
}

BOOST_AUTO_TEST_CASE(slots_are_reused_at_a_steady_depth) {
    work_request_table<handler> t;
    // A queue kept 8 deep for 10,000 posts: the slab never grows past 8 slots, each id
    // distinct from every earlier one.
    std::uint64_t waiting[8];
    for (auto& id : waiting) id = t.insert(make("x"));
    std::uint64_t last = 0;
    for (int i = 0; i < 10'000; ++i) {
        auto& id = waiting[i % 8];
        BOOST_REQUIRE(t.take(id));
        id = t.insert(make("x"));
        BOOST_TEST((id >> 24) > (last >> 24)); // serials only grow
        last = id;
        BOOST_TEST((id & 0xffffff) < 8u, "slot " << (id & 0xffffff));
    }
    BOOST_TEST(t.size() == 8u);
}
