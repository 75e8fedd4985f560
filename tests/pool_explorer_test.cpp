// Every interleaving of a shard pool's stop with a move and a rebalance, without I/O: the
// core's own pool_move_course, pool_rebalance_start and pool_stop_course
// (src/pool/pool_machine.hpp) — what src/pool/shard_pool.cpp follows — driven against a model of what
// is around them: two shards, each an io_context whose run() returns as soon as it has no
// work (stop()'s guard and channel, the holds taken on it, the handlers queued on it); two
// pooled connections on shard 0, whose ids hold shard 0's channel (and the one they move
// to) until the stop closes them (pool_stop_mode::close); a move of the first to shard 1
// (its handler posted), a rebalance moving the second to shard 1 (its count called on the
// connection's strand, the report posted to shard 0); the id's moves succeeding or failing
// (a closed id's fails). The strand's hop goes through the old shard while that still runs
// (an invoker of the strand queued there: the worst case). Each actor's next step is one choice; the explorer runs
// the model once per sequence of choices, depth first, and checks what a user relies on:
//   - nothing is posted to a shard, nor work taken on one, after its run() returned (a
//     continuation lost: review F3's hang);
//   - every operation completes exactly once (its handler, its report, or its refusal);
//   - stop() returns: every shard runs out of work once the stop let go of it.
// The explorer is shown to fail: three cases put a defect back into the machine.
#include "pool/pool_machine.hpp"
#include "support/explorer.hpp"

#include <boost/test/unit_test.hpp>

#include <array>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace rdmacm::detail;
using rdmacm::test::exploration;
using rdmacm::test::trace_of;

// The machine under test: the core's, or one with a defect put back.
struct rules {
    pool_move_actions (*course)(pool_move_place, pool_move_facts) = &pool_move_course;
    pool_move_actions (*rebalance_start)(pool_move_facts) = &pool_rebalance_start;
    std::array<pool_stop_step, 5> stop = pool_stop_course;
};

struct config {
    bool move = false;      // connection 0 moved to shard 1, its handler posted
    bool rebalance = false; // connection 1 moved to shard 1 by a rebalance, its report on shard 0
    bool fails = false;     // the ids' moves fail (the ids stay on shard 0)
};

constexpr int shards = 2;
constexpr int report_shard = 0;

struct item {
    enum kind : std::uint8_t { place, hop, handler, report } what;
    int op = 0;
    pool_move_place at = pool_move_place::ordered;
};

class model : public rdmacm::test::explored_model<model> {
    friend class rdmacm::test::explored_model<model>;

public:
    model(rules r, config c) : rules_(r), config_(c) {
        ops_[0].present = c.move;
        ops_[1].present = c.rebalance;
        ops_[1].called = true;
        for (int s = 0; s < shards; ++s) guard_[s] = true;
        for (auto& op : ops_) {
            op.id_hold = true; // its id owns shard 0's channel
            ++holds_[0];
        }
    }

private:
    struct op_state {
        bool present = false, called = false;
        bool started = false;    // the rebalance's start (its report's hold) taken
        bool ordered = false;    // the move's order taken (under the pool's lock)
        bool to_migrate = false; // the migrate call is next (no lock held)
        bool hold_old = false, hold_new = false, hop_hold = false, report_hold = false;
        bool id_hold = false; // its id owns the channel of the shard it is on
        int id_shard = 0;
        bool closed = false;
        int completions = 0;
    };

    std::vector<std::function<void()>> enabled() {
        settle(); // after the step before (a no-op at the start)
        std::vector<std::function<void()>> steps;
        for (int k = 0; k < 2; ++k) {
            auto& op = ops_[k];
            if (!op.present) continue;
            if (op.called && !op.started)
                steps.push_back([this, k] { start_rebalance(k); });
            else if (!op.ordered)
                steps.push_back([this, k] { order(k); });
            else if (op.to_migrate)
                steps.push_back([this, k] { migrate(k); });
        }
        for (int s = 0; s < shards; ++s)
            if (!returned_[s] && !queue_[s].empty()) steps.push_back([this, s] { run_one(s); });
        if (stop_at_ < rules_.stop.size() && (rules_.stop[stop_at_] != pool_stop_step::join || all_returned()))
            steps.push_back([this] { stop_step(); });
        return steps;
    }

    // Work on shard `s`, as holding_executor takes it.
    void hold(int s, bool& flag) {
        if (returned_[s]) fail("work taken on shard " + std::to_string(s) + " after its run() returned");
        flag = true;
        ++holds_[s];
    }
    void release(int s, bool& flag) {
        if (!flag) return;
        flag = false;
        --holds_[s];
        settle(); // Asio: the scheduler stops as the count reaches zero
    }
    void post(int s, item it) {
        if (returned_[s]) fail("a continuation posted to shard " + std::to_string(s) + " after its run() returned");
        queue_[s].push_back(it);
    }

    void start_rebalance(int k) {
        auto& op = ops_[k];
        op.started = true;
        for (auto a : rules_.rebalance_start({.stopping = stopping_})) {
            if (a == pool_move_action::refuse) {
                ++op.completions; // no move ordered: the report, pool_stopped, on the system executor
                op.ordered = true;
            } else if (a == pool_move_action::hold_shards) {
                hold(report_shard, op.report_hold);
            }
        }
    }

    void order(int k) {
        auto& op = ops_[k];
        op.ordered = true;
        for (auto a : rules_.course(pool_move_place::ordered, {.stopping = stopping_})) {
            switch (a) {
            case pool_move_action::refuse:
                // pool_stopped on the system executor; a rebalance's count, the last, posts the report.
                if (op.called)
                    post(report_shard, {item::report, k});
                else
                    ++op.completions;
                break;
            case pool_move_action::hold_shards:
                hold(0, op.hold_old);
                hold(1, op.hold_new);
                break;
            case pool_move_action::migrate: op.to_migrate = true; break;
            default: fail("an action that has no place in an order"); break;
            }
        }
    }

    // The id's move: on success its end runs on the new shard, whose channel the id owns
    // now; on failure (a closed id's too) on the old one.
    void migrate(int k) {
        auto& op = ops_[k];
        op.to_migrate = false;
        if (config_.fails || op.closed) {
            post(0, {item::place, k, pool_move_place::failed});
            return;
        }
        if (op.id_hold) { // the id owns the new channel from its move's start, the old one until its end
            bool taken = false;
            hold(1, taken);
            release(0, op.id_hold);
            op.id_hold = taken;
            op.id_shard = 1;
        }
        post(1, {item::place, k, pool_move_place::migrated});
    }

    void run_one(int s) {
        item it = queue_[s].front();
        queue_[s].pop_front();
        running_ = s; // a handler is the context's work until it returns
        auto& op = ops_[it.op];
        switch (it.what) {
        case item::place: act(it.op, it.at); break;
        case item::hop: post(1, {item::place, it.op, pool_move_place::at_home}); break; // on the old shard: on
        case item::handler: handler(it.op); break;
        case item::report:
            ++op.completions;
            release(report_shard, op.report_hold);
            break;
        }
        running_ = -1;
    }

    void act(int k, pool_move_place at) {
        auto& op = ops_[k];
        for (auto a : rules_.course(at, {.stopping = stopping_})) {
            switch (a) {
            case pool_move_action::follow_strand:
                hold(1, op.hop_hold); // the hop's guard on the new shard
                // Through the old shard when an invoker of the strand is queued there (its
                // work keeps that shard running): here, whenever the old shard still runs.
                if (returned_[0])
                    post(1, {item::place, k, pool_move_place::at_home});
                else
                    post(0, {item::hop, k});
                break;
            case pool_move_action::release_old: release(0, op.hold_old); break;
            case pool_move_action::end_move: break;
            case pool_move_action::post_handler:
                if (op.called && at == pool_move_place::at_home)
                    handler(k); // a rebalance's count is called on the strand
                else
                    post(1, {item::handler, k});
                break;
            case pool_move_action::release_new: release(1, op.hold_new); break;
            default: fail("an action that has no place after an order"); break;
            }
        }
        if (at == pool_move_place::at_home) release(1, op.hop_hold);
    }

    void handler(int k) {
        auto& op = ops_[k];
        if (op.called)
            post(report_shard, {item::report, k}); // the last count posts the report
        else
            ++op.completions;
        act(k, pool_move_place::handler_done);
    }

    void stop_step() {
        switch (rules_.stop[stop_at_++]) {
        case pool_stop_step::refuse_new: stopping_ = true; break;
        case pool_stop_step::complete_waiting: break; // none waits behind a move here
        case pool_stop_step::close_ids:
            for (auto& op : ops_) {
                op.closed = true;
                release(op.id_shard, op.id_hold); // its destroy lets go of its channel, its reader's work
            }
            break;
        case pool_stop_step::release_shards:
            for (auto& g : guard_) g = false;
            break;
        case pool_stop_step::join: joined_ = true; break;
        }
    }

    // Asio: run() returns once the context's work count is zero.
    void settle() {
        for (int s = 0; s < shards; ++s)
            if (!returned_[s] && running_ != s && !guard_[s] && holds_[s] == 0 && queue_[s].empty())
                returned_[s] = true;
    }
    bool all_returned() const { return returned_[0] && returned_[1]; }

    bool finished() {
        if (!joined_) {
            std::string why = "stop() never returns:";
            for (int s = 0; s < shards; ++s)
                if (!returned_[s])
                    why += " shard " + std::to_string(s) + " (" + std::to_string(holds_[s]) + " holds, " +
                           std::to_string(queue_[s].size()) + " queued)";
            fail(why);
        }
        for (int k = 0; k < 2; ++k)
            if (ops_[k].present && ops_[k].completions != 1)
                fail(std::string(k == 0 ? "the move" : "the rebalance") + " completed " +
                     std::to_string(ops_[k].completions) + " times");
        return !violation;
    }

    rules rules_;
    config config_;
    std::array<op_state, 2> ops_{};
    std::array<bool, shards> guard_{};
    std::array<int, shards> holds_{};
    std::array<std::deque<item>, shards> queue_{};
    std::array<bool, shards> returned_{};
    int running_ = -1; // the shard running a handler now
    bool stopping_ = false, joined_ = false;
    std::size_t stop_at_ = 0;
};

exploration explore_all(rules r, std::size_t& total) {
    exploration all;
    for (bool move : {true, false})
        for (bool rebalance : {true, false})
            for (bool fails : {false, true}) {
                if (!move && !rebalance) continue;
                const config c{move, rebalance, fails};
                auto e = rdmacm::test::explore([&](auto choose) -> std::optional<std::string> {
                    model m(r, c);
                    m.run(choose);
                    return m.violation;
                });
                total += e.runs;
                if (e.violation) {
                    e.violation = *e.violation + " (a move " + (move ? "and " : "") + (rebalance ? "a rebalance" : "") +
                                  (fails ? ", failing" : "") + ")";
                    return e;
                }
                all.runs += e.runs;
            }
    return all;
}

// A defect put back into the machine: the explorer must find it, breaking `expected`.
void expect_found(const rules& r, const std::string& expected) {
    std::size_t total = 0;
    auto e = explore_all(r, total);
    BOOST_TEST_MESSAGE("found: " << e.violation.value_or("nothing"));
    BOOST_TEST(e.violation.value_or("").starts_with(expected), e.violation.value_or("nothing"));
}

} // namespace

BOOST_AUTO_TEST_CASE(every_interleaving_of_a_stop_with_a_move_and_a_rebalance_keeps_the_pool_s_promises) {
    std::size_t total = 0;
    auto e = explore_all(rules{}, total);
    std::printf("pool explorer: %zu interleavings of a stop with a move and a rebalance\n", total);
    BOOST_TEST(!e.violation, e.violation.value_or("") << " after choices " << trace_of(e));
    BOOST_TEST(total > 1000u);
}

// Review F3 put back: a move posts to the shards it captured, holding nothing there.
BOOST_AUTO_TEST_CASE(the_explorer_finds_a_move_that_holds_no_shard) {
    rules r;
    r.course = [](pool_move_place p, pool_move_facts f) {
        auto a = pool_move_course(p, f);
        if (p == pool_move_place::ordered && !f.stopping) return pool_move_actions{{pool_move_action::migrate}, 1};
        return a;
    };
    expect_found(r, "a continuation posted to shard 1 after its run() returned");
}

// stop() letting go of the shards before it refuses new operations.
BOOST_AUTO_TEST_CASE(the_explorer_finds_a_stop_that_lets_go_of_the_shards_first) {
    rules r;
    r.stop = {pool_stop_step::release_shards, pool_stop_step::refuse_new, pool_stop_step::complete_waiting,
              pool_stop_step::close_ids, pool_stop_step::join};
    expect_found(r, "work taken on shard 1 after its run() returned");
}

// A rebalance whose report's shard is not held from its start.
BOOST_AUTO_TEST_CASE(the_explorer_finds_a_rebalance_that_holds_no_shard_for_its_report) {
    rules r;
    r.rebalance_start = [](pool_move_facts) { return pool_move_actions{}; };
    expect_found(r, "a continuation posted to shard 0 after its run() returned");
}
