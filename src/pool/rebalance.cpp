// The built-in rebalancing plans: greedy, one connection at a time from the fullest shard to
// the emptiest, on a copy of the snapshot.
#include "rdmacm/rebalance.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace rdmacm {
namespace {

// The snapshot by shard, for moving connections between shards on paper.
struct shards_on_paper {
    std::vector<std::vector<connection_load>> shards;

    shards_on_paper(std::span<const connection_load> connections, std::size_t n) : shards(n) {
        for (const auto& c : connections)
            if (c.shard < n) shards[c.shard].push_back(c);
    }
    template <typename Measure>
    std::pair<std::size_t, std::size_t> extremes(Measure measure) const {
        auto [lo, hi] = std::minmax_element(shards.begin(), shards.end(),
                                            [&](const auto& a, const auto& b) { return measure(a) < measure(b); });
        return {static_cast<std::size_t>(lo - shards.begin()), static_cast<std::size_t>(hi - shards.begin())};
    }
    planned_move move(std::size_t from, std::size_t index, std::size_t to) {
        auto c = shards[from][index];
        shards[from].erase(shards[from].begin() + static_cast<std::ptrdiff_t>(index));
        c.shard = to;
        shards[to].push_back(c);
        return {c.key, from, to};
    }
};

double total(const std::vector<connection_load>& shard) {
    return std::accumulate(shard.begin(), shard.end(), 0.0, [](double sum, const auto& c) { return sum + c.load; });
}

} // namespace

rebalance_plan even_count() {
    return [](std::span<const connection_load> connections, std::size_t n) {
        std::vector<planned_move> moves;
        if (n == 0) return moves;
        shards_on_paper paper(connections, n);
        auto count = [](const auto& shard) { return shard.size(); };
        for (;;) {
            auto [lo, hi] = paper.extremes(count);
            if (paper.shards[hi].size() <= paper.shards[lo].size() + 1) return moves;
            // The newest connection first: the oldest stay where their caches are.
            moves.push_back(paper.move(hi, paper.shards[hi].size() - 1, lo));
        }
    };
}

rebalance_plan even_load(double min_gain) {
    return [min_gain](std::span<const connection_load> connections, std::size_t n) {
        std::vector<planned_move> moves;
        if (n == 0) return moves;
        shards_on_paper paper(connections, n);
        double mean = std::accumulate(connections.begin(), connections.end(), 0.0,
                                      [](double sum, const auto& c) { return sum + c.load; }) /
                      static_cast<double>(n);
        // Each move narrows the gap between the two extremes by more than min_gain * mean,
        // so this ends.
        for (;;) {
            auto [lo, hi] = paper.extremes(total);
            double gap = total(paper.shards[hi]) - total(paper.shards[lo]);
            // Moving load x leaves a gap of |gap - 2x|: take the x that leaves the least.
            std::size_t best = 0;
            double best_gap = gap;
            for (std::size_t i = 0; i < paper.shards[hi].size(); ++i) {
                double left = std::abs(gap - 2 * paper.shards[hi][i].load);
                if (left < best_gap) best_gap = left, best = i;
            }
            if (gap - best_gap <= min_gain * mean || gap - best_gap <= 0) return moves;
            moves.push_back(paper.move(hi, best, lo));
        }
    };
}

} // namespace rdmacm
