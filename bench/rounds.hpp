#pragma once
// Ours against the baseline, round by round: each round runs both, one after the other, so
// a slow stretch of the host (TCG moves times ±40 % run to run) falls on both sides of the
// round's ratio. A benchmark reports the rounds' median ratio and its spread (min–max).
#include <algorithm>
#include <cstdio>
#include <vector>

namespace bench {

class round_ratios {
public:
    void add(double ratio) { ratios_.push_back(ratio); }
    double median() const {
        auto r = ratios_;
        std::sort(r.begin(), r.end());
        return r.empty() ? 0 : r[r.size() / 2];
    }
    // "0.92 (0.85-0.97 over 7 rounds)"
    void print() const {
        if (ratios_.empty()) return;
        auto [lo, hi] = std::minmax_element(ratios_.begin(), ratios_.end());
        std::printf("%.2f (%.2f-%.2f over %zu rounds)", median(), *lo, *hi, ratios_.size());
    }

private:
    std::vector<double> ratios_;
};

} // namespace bench
