// Every interleaving of two moves into one channel, without I/O: the core's own move_course
// and move_reads (src/move_machine.hpp) — the code src/migrate.cpp and src/channel_impl.hpp
// follow — driven against a model of what is around them: three contexts (the moves' old
// executor, which also runs their old channel's reader; the target channel's reader; the new
// executor), each a FIFO queue that returns from run() once it has neither work nor
// handlers; the kernel's event queues of both channels (a moved id's queued events go along
// in its call, without a wake-up, semantics F2); the target's routing lock (looks and reads
// are made one at a time); and other traffic waking the target's reader at any point, which keeps it
// busy across two steps; and a move's read on that reader's strand stopping short of EAGAIN
// (a handler run inline that throws, librdmacm's read failing), once per run. The new
// context is held by the handlers' work (tracked there by async_start), the target's reader
// by the moving ids, which own its channel. Each actor's next step is one choice; the explorer runs the model
// once per sequence of choices, depth first (a stateless search: each run replays its
// prefix from a fresh model, as loom does), and after every step and at the end of every run
// checks what a user relies on:
//   - nothing is posted to a context that returned from run() (a move's step lost: F4);
//   - a move ends after every event that moved along with it was read and held (held
//     events, then deferred operations, then newer ones: F5);
//   - every move ends exactly once, every event is delivered exactly once, and every
//     context runs out of work at the end.
// The explorer is shown to fail: two cases put a reviewed defect back into the course (F4's
// release before the post; F5's end beside the read) and expect it to find a violation.
#include "move_machine.hpp"
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
using course_fn = move_actions (*)(move_place, move_facts);

enum context : std::uint8_t { old_ctx, target_reader, new_ctx, contexts };
constexpr const char* context_names[] = {"the old context", "the target's reader", "the new context"};

struct task {
    enum kind : std::uint8_t { old_step, read_for_move, end, drain_start, drain_end } what;
    int move = 0;
};

// One run of the model, its choices made by `choose(count)`.
class model {
public:
    struct config {
        bool hop;                  // the new executor is on another context than the old one
        std::array<int, 2> events; // each moving id's events queued on the old channel
    };

    model(course_fn course, config c) : course_(course), config_(c) {
        work_[old_ctx] = 1;       // the old channel's reader, while the channel has owners
        work_[target_reader] = 1; // the target's reader: the moving ids own the channel
        // The handlers' work, tracked by async_start on the new executor. Without a hop, the
        // worst case: handlers with executors of their own, so nothing of theirs holds the
        // old context (which is then the new one too).
        work_[new_ctx] = config_.hop ? 1 : 0;
        for (int m = 0; m < 2; ++m) old_queue_[m] = config_.events[m];
    }

    // Runs to the end; false with `violation` set at the first invariant broken.
    template <typename Choose>
    bool run(Choose&& choose) {
        for (;;) {
            auto steps = enabled();
            if (steps.empty()) return finished();
            steps[choose(steps.size())]();
            if (violation) return false;
        }
    }

    std::optional<std::string> violation;

private:
    struct move_state {
        bool called = false, ended = false;
        std::uint64_t ticket = 0;
        int held = 0, delivered = 0, ends = 0;
    };

    std::vector<std::function<void()>> enabled() {
        std::vector<std::function<void()>> steps;
        for (int m = 0; m < 2; ++m)
            if (!moves_[m].called) steps.push_back([this, m] { call(m); });
        for (int c = 0; c < contexts; ++c)
            if (runnable(static_cast<context>(c))) steps.push_back([this, c] { run_one(static_cast<context>(c)); });
        // Once per run, a move's read on the strand may stop short of EAGAIN (a handler run
        // inline threw, or librdmacm's read failed: ENOMEM).
        if (!cut_short_ && !queue_[target_reader].empty() &&
            queue_[target_reader].front().what == task::read_for_move && !target_queue_.empty())
            steps.push_back([this] {
                cut_short_ = true;
                run_one(target_reader, true);
            });
        if (!woken_)
            steps.push_back([this] {
                woken_ = true;
                post(target_reader, {task::drain_start});
            });
        return steps;
    }

    // (Only the target's reader holds the routing lock across steps, and its drain's end is
    // first in its queue then: whatever is queued anywhere can run.)
    bool runnable(context c) const { return !queue_[c].empty(); }

    void fail(std::string what) {
        if (!violation) violation = std::move(what);
    }

    void post(context c, task t) {
        if (stopped_[c]) return fail(std::string("a step posted to ") + context_names[c] + " after its run() returned");
        queue_[c].push_back(t);
    }
    void work_done(context c) {
        --work_[c];
        stop_if_idle(c);
    }
    void stop_if_idle(context c) {
        if (!stopped_[c] && queue_[c].empty() && work_[c] == 0) stopped_[c] = true;
    }

    // The migrate call (on the thread that starts the move), then what the course says.
    void call(int m) {
        auto& mv = moves_[m];
        mv.called = true;
        for (; old_queue_[m] > 0; --old_queue_[m]) target_queue_.push_back(m);
        mv.ticket = reads_.ticket();
        for (auto a : course_(move_place::called, facts())) {
            switch (a) {
            case move_action::post_old_step: post(old_ctx, {task::old_step, m}); break;
            case move_action::release_channels:
                if (--old_owners_ == 0) work_done(old_ctx); // the old reader stops
                break;
            default: fail("an action out of place after the call");
            }
        }
    }

    void run_one(context c, bool stop_short = false) {
        auto t = queue_[c].front();
        queue_[c].pop_front();
        switch (t.what) {
        case task::old_step: at(move_place::old_step, t.move, true); break;
        case task::read_for_move:
            if (!read(t.move, stop_short)) { // again from a post, the end after it
                post(target_reader, t);
                break;
            }
            at(move_place::read_done, t.move, false);
            work_[old_ctx] -= back_held_[t.move]; // the tracked way back, let go of once posted
            back_held_[t.move] = 0;
            stop_if_idle(old_ctx);
            break;
        case task::end: finish(t.move); break;
        case task::drain_start:
            route_locked_ = true;
            drain_begun_ = reads_.begun();
            queue_[c].push_front({task::drain_end});
            break;
        case task::drain_end:
            drain();
            reads_.drained(drain_begun_);
            route_locked_ = false;
            break;
        }
        stop_if_idle(c);
    }

    // Move m at `place`, on the old executor's thread when `here`.
    void at(move_place place, int m, bool here) {
        for (auto a : course_(place, facts())) {
            switch (a) {
            case move_action::read_target:
                if (!route_locked_ && look(m)) { // here: the lock taken without waiting, nothing to read
                    at(move_place::read_done, m, true);
                } else { // read on the reader's strand, the way back held (src/migrate.cpp)
                    if (!config_.hop) ++work_[old_ctx], ++back_held_[m];
                    post(target_reader, {task::read_for_move, m});
                }
                break;
            case move_action::go_to_end:
                if (config_.hop)
                    post(new_ctx, {task::end, m});
                else if (here)
                    finish(m);
                else
                    post(old_ctx, {task::end, m});
                break;
            case move_action::finish: finish_now(m); break;
            default: fail("an action out of place on a move's way");
            }
        }
    }

    void finish(int m) { at(move_place::end, m, true); }

    void finish_now(int m) {
        auto& mv = moves_[m];
        for (int e : target_queue_)
            if (e == m)
                return fail("move " + std::to_string(m) + " ended before an event that moved along with it was read");
        mv.delivered += mv.held; // held events first, in order
        mv.held = 0;
        mv.ended = true;
        ++mv.ends;
        if (++ended_ == 2 && config_.hop) work_done(new_ctx); // the handlers have run
    }

    // With the route held, as channel_impl's look: covered (move_reads, the
    // channel's own), or nothing queued (a poll).
    bool look(int m) {
        if (reads_.covered(moves_[m].ticket)) return true;
        const auto begun = reads_.begun();
        if (!target_queue_.empty()) return false;
        reads_.drained(begun);
        return true;
    }
    // On the reader's strand, the route claimed: the move's read unless look() says
    // none is owed. Whether it is done.
    bool read(int m, bool stop_short) {
        if (look(m)) return true;
        const auto begun = reads_.begun();
        if (stop_short) return false; // (before its first event: the worst case)
        drain();
        reads_.drained(begun);
        return true;
    }
    void drain() {
        for (int e : target_queue_) route(e);
        target_queue_.clear();
    }
    void route(int e) {
        auto& mv = moves_[e];
        if (mv.ended)
            ++mv.delivered;
        else
            ++mv.held;
    }

    bool finished() {
        for (int m = 0; m < 2; ++m) {
            const auto& mv = moves_[m];
            if (mv.ends != 1) fail("move " + std::to_string(m) + " ended " + std::to_string(mv.ends) + " times");
            if (mv.delivered != config_.events[m])
                fail("move " + std::to_string(m) + ": " + std::to_string(mv.delivered) + " of " +
                     std::to_string(config_.events[m]) + " events delivered");
        }
        for (int c = 0; c < contexts; ++c) stop_if_idle(static_cast<context>(c));
        for (int c = 0; c < contexts; ++c)
            if (c != target_reader && !stopped_[c])
                fail(std::string(context_names[c]) + " never ran out of work (" + std::to_string(work_[c]) + " left)");
        return !violation;
    }

    move_facts facts() const { return {.look = true}; }

    course_fn course_;
    config config_;
    move_reads reads_;
    std::array<move_state, 2> moves_{};
    std::array<int, 2> old_queue_{};
    std::array<int, 2> back_held_{};
    std::vector<int> target_queue_; // the target channel's kernel queue: whose event each is
    std::array<std::deque<task>, contexts> queue_{};
    std::array<int, contexts> work_{};
    std::array<bool, contexts> stopped_{};
    int old_owners_ = 2, ended_ = 0;
    bool route_locked_ = false, woken_ = false, cut_short_ = false;
    std::uint64_t drain_begun_ = 0;
};

// Every interleaving of one configuration.
exploration explore(course_fn course, model::config config) {
    return rdmacm::test::explore([&](auto choose) -> std::optional<std::string> {
        model m(course, config);
        if (m.run(choose)) return std::nullopt;
        return m.violation;
    });
}

constexpr std::array<model::config, 4> configs{{
    {.hop = true, .events = {0, 1}},
    {.hop = false, .events = {0, 1}},
    {.hop = true, .events = {1, 1}},
    {.hop = false, .events = {1, 1}},
}};

std::size_t explore_all(course_fn course, std::optional<std::string>& violation) {
    std::size_t runs = 0;
    for (const auto& c : configs) {
        auto r = explore(course, c);
        runs += r.runs;
        if (r.violation) {
            violation = *r.violation;
            return runs;
        }
    }
    return runs;
}

// F4 put back: the channels let go of before the step is posted.
move_actions release_then_post(move_place place, move_facts facts) {
    if (place == move_place::called) return {{move_action::release_channels, move_action::post_old_step}, 2};
    return move_course(place, facts);
}

// F5 put back: the end on its way beside the read, not after it.
move_actions end_beside_read(move_place place, move_facts facts) {
    if (place == move_place::old_step && facts.look) return {{move_action::go_to_end, move_action::read_target}, 2};
    if (place == move_place::read_done) return {};
    return move_course(place, facts);
}

} // namespace

BOOST_AUTO_TEST_CASE(every_interleaving_of_two_moves_into_one_channel_keeps_order_and_loses_nothing) {
    std::optional<std::string> violation;
    const auto runs = explore_all(&move_course, violation);
    std::printf("move_course: %zu interleavings explored, %s\n", runs, violation ? violation->c_str() : "no violation");
    BOOST_TEST(!violation, *violation);
    BOOST_TEST(runs > 1000u); // the model branches as designed (a regression here explores nothing)
}

BOOST_AUTO_TEST_CASE(the_explorer_finds_f4_put_back) {
    std::optional<std::string> violation;
    const auto runs = explore_all(&release_then_post, violation);
    std::printf("F4 put back: found after %zu interleavings: %s\n", runs, violation ? violation->c_str() : "nothing");
    BOOST_REQUIRE(violation);
    BOOST_TEST(violation->find("after its run() returned") != std::string::npos, *violation);
}

BOOST_AUTO_TEST_CASE(the_explorer_finds_f5_put_back) {
    std::optional<std::string> violation;
    const auto runs = explore_all(&end_beside_read, violation);
    std::printf("F5 put back: found after %zu interleavings: %s\n", runs, violation ? violation->c_str() : "nothing");
    BOOST_REQUIRE(violation);
    BOOST_TEST(violation->find("before an event that moved along") != std::string::npos, *violation);
}
