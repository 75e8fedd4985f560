// Placement policies and rebalancing plans without I/O: what shard_pool decides, checked on
// snapshots.
#include <rdmacm/placement.hpp>
#include <rdmacm/rebalance.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <set>

using namespace rdmacm;

namespace {

std::vector<connection_load> on_shards(std::initializer_list<std::pair<std::size_t, double>> shard_and_load) {
    std::vector<connection_load> v;
    std::uint64_t key = 1;
    for (auto [shard, load] : shard_and_load) v.push_back({key++, shard, load});
    return v;
}

// Applies the moves to the snapshot; fails the test on a move that does not match it.
std::vector<connection_load> after_moves(std::vector<connection_load> v, const std::vector<planned_move>& moves) {
    std::set<std::uint64_t> moved;
    for (const auto& m : moves) {
        auto it = std::find_if(v.begin(), v.end(), [&](const auto& c) { return c.key == m.key; });
        BOOST_REQUIRE(it != v.end());
        BOOST_TEST(it->shard == m.from);
        BOOST_TEST(moved.insert(m.key).second, "connection " << m.key << " moved twice");
        it->shard = m.to;
    }
    return v;
}

std::vector<double> per_shard(const std::vector<connection_load>& v, std::size_t n, bool by_load) {
    std::vector<double> s(n);
    for (const auto& c : v) s[c.shard] += by_load ? c.load : 1;
    return s;
}

} // namespace

BOOST_AUTO_TEST_CASE(round_robin_takes_each_shard_in_turn) {
    auto p = round_robin();
    std::vector<std::size_t> counts{0, 0, 0};
    connection_request r{cm_id(boost::asio::system_executor()), {}};
    std::vector<std::size_t> picked;
    for (int i = 0; i < 7; ++i) picked.push_back(p(counts, r));
    BOOST_TEST(picked == (std::vector<std::size_t>{0, 1, 2, 0, 1, 2, 0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(least_connections_picks_the_emptiest_shard) {
    auto p = least_connections();
    connection_request r{cm_id(boost::asio::system_executor()), {}};
    BOOST_TEST(p(std::vector<std::size_t>{3, 1, 2}, r) == 1u);
    BOOST_TEST(p(std::vector<std::size_t>{2, 0, 0}, r) == 1u); // the lowest index among equals
}

BOOST_AUTO_TEST_CASE(even_count_leaves_counts_within_one_with_the_fewest_moves) {
    auto snapshot = on_shards({{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {1, 0}});
    auto moves = even_count()(snapshot, 4);
    auto counts = per_shard(after_moves(snapshot, moves), 4, false);
    BOOST_TEST(*std::max_element(counts.begin(), counts.end()) - *std::min_element(counts.begin(), counts.end()) <= 1);
    BOOST_TEST(moves.size() == 5u); // 7,1,0,0 -> 2,2,2,2 (or 3,1,2,2... never fewer than 5)
    // The newest connections move; the oldest stay.
    for (const auto& m : moves) BOOST_TEST(m.key >= 3u);
}

BOOST_AUTO_TEST_CASE(even_count_moves_nothing_when_balanced) {
    BOOST_TEST(even_count()(on_shards({{0, 0}, {1, 0}, {1, 0}}), 2).empty());
    BOOST_TEST(even_count()({}, 3).empty());
}

BOOST_AUTO_TEST_CASE(even_load_balances_the_sum_of_loads_not_the_count) {
    // Shard 0 carries one heavy and three light connections, shard 1 two light ones.
    auto snapshot = on_shards({{0, 10}, {0, 1}, {0, 1}, {0, 1}, {1, 1}, {1, 1}});
    auto moves = even_load()(snapshot, 2);
    auto loads = per_shard(after_moves(snapshot, moves), 2, true);
    BOOST_TEST(std::abs(loads[0] - loads[1]) == 5.0); // the best possible: 10 vs 5
    BOOST_TEST(moves.size() <= 3u);
    auto counts = per_shard(after_moves(snapshot, moves), 2, false);
    BOOST_TEST(counts[0] != counts[1]); // by load, not by count
}

BOOST_AUTO_TEST_CASE(even_load_leaves_near_balanced_shards_alone) {
    BOOST_TEST(even_load(0.2)(on_shards({{0, 10}, {1, 9.5}}), 2).empty());
    BOOST_TEST(even_load()(on_shards({{0, 0}, {0, 0}, {0, 0}}), 3).empty()); // no load reported
}
