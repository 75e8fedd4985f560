#pragma once
// A stateless explorer of every interleaving (as loom does): `run_once(choose)` builds a
// fresh model and runs it to its end, each of its next steps one call of `choose(count)`
// (which of `count` enabled steps goes next); it returns the first invariant broken, if
// any. The explorer runs the model once per sequence of choices, depth first, each run
// replaying its prefix, until one fails or none is left.
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rdmacm::test {

struct exploration {
    std::size_t runs = 0;
    std::optional<std::string> violation;
    std::vector<std::size_t> trace; // the choices of the failing run
};

// What every model shares: its first violation, fail() to record one, and run() — while the
// model has enabled steps (`enabled()`, a vector of callables), the one `choose(count)`
// picks; false at the first violation, else what `finished()` (the checks at the end) says.
// A model derives from explored_model<model> and befriends it (enabled, finished private).
template <typename Model>
class explored_model {
public:
    template <typename Choose>
    bool run(Choose&& choose) {
        auto& self = static_cast<Model&>(*this);
        for (;;) {
            auto steps = self.enabled();
            if (steps.empty()) return self.finished();
            steps[choose(steps.size())]();
            if (violation) return false;
        }
    }

    std::optional<std::string> violation;

protected:
    void fail(std::string why) {
        if (!violation) violation = std::move(why);
    }
};

template <typename RunOnce>
exploration explore(RunOnce run_once) {
    exploration result;
    std::vector<std::size_t> prefix;
    for (;;) {
        std::vector<std::pair<std::size_t, std::size_t>> made; // (choice, of how many)
        std::optional<std::string> violation = run_once([&](std::size_t count) {
            std::size_t pick = made.size() < prefix.size() ? prefix[made.size()] : 0;
            made.emplace_back(pick, count);
            return pick;
        });
        ++result.runs;
        if (violation) {
            result.violation = std::move(violation);
            for (auto& c : made) result.trace.push_back(c.first);
            return result;
        }
        // The next sequence: the last choice that has an untried sibling, advanced.
        while (!made.empty() && made.back().first + 1 == made.back().second) made.pop_back();
        if (made.empty()) return result;
        prefix.clear();
        for (auto& c : made) prefix.push_back(c.first);
        ++prefix.back();
    }
}

// A failing run's choices, for its message.
inline std::string trace_of(const exploration& e) {
    std::string t;
    for (auto c : e.trace) t += std::to_string(c) + " ";
    return t;
}

} // namespace rdmacm::test
