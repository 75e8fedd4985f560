#pragma once
// One figure per round (a rate, or ours / the baseline's): each round runs both sides, one
// after the other, so a slow stretch of the host (TCG moves times ±40 % run to run) falls on
// both sides of the round's ratio. A benchmark reports the rounds' median and its spread
// (min–max).
#include <algorithm>
#include <cstdio>
#include <vector>

namespace bench {

class round_figures {
public:
    void add(double figure) { figures_.push_back(figure); }
    double median() const {
        auto r = figures_;
        std::sort(r.begin(), r.end());
        return r.empty() ? 0 : r[r.size() / 2];
    }
    // "0.92 (0.85-0.97 over 7 rounds)"
    void print() const {
        if (figures_.empty()) return;
        auto [lo, hi] = std::minmax_element(figures_.begin(), figures_.end());
        std::printf("%.2f (%.2f-%.2f over %zu rounds)", median(), *lo, *hi, figures_.size());
    }

private:
    std::vector<double> figures_;
};

} // namespace bench
