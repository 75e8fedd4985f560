// Every interleaving of an id's calls, a move, a close and its context's shutdown, without
// I/O: the core's id_life (src/cm/id_life.hpp) — what src/cm/id_impl.cpp, src/cm/migrate.cpp and
// src/cm/sync_mode.cpp ask under the id's mutex — driven against a model of what is around it.
// Each lock section of the core is one step, and so is each thing it does after the lock:
//   - callers (a call_guard's call, an operation's): enter under the lock (or wait for the
//     migrate call being made, or find the id closed), make the call, leave under the lock
//     and do what the machine answers (move a waiting move on, submit the destroy);
//   - a move: begun under the lock with its first readiness check; its call made here or,
//     when the old reader is busy, from a job on that reader; refused after all (a close
//     came) or made (no lock held), returning under the lock; its end, on the context;
//   - a close, doing what the machine answers (ending a move still to make its call:
//     end_migration, a lock section of its own);
//   - the context's shutdown: the id told (a move still to make its call abandoned), then
//     the jobs queued on the context let go of (a move's end, dropped, lets go of the move);
//   - the destroyer, destroying the id once it was submitted.
// After every step and at the end of every run it checks what a user relies on:
//   - no librdmacm call on the id beside rdma_migrate_id, nor on a destroyed id; the id
//     never destroyed under a call; no move begun under a blocking call of synchronous mode;
//   - the id destroyed exactly once once closed, never unless closed;
//   - a move's handler completes (or is let go of at a shutdown) exactly once;
//   - nothing waits for good (a call for a migrate call, a move for a call's end).
// The explorer is shown to fail: five cases put a defect back into the machine (the last call
// out forgetting the waiting move; a call not waiting for rdma_migrate_id; a shutdown taking
// a move in its call; a move begun beside a blocking call of synchronous mode; a close
// destroying the id whatever its move is doing).
#include "cm/id_life.hpp"
#include "support/explorer.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace rdmacm::detail;
using rdmacm::test::exploration;
using rdmacm::test::trace_of;
using action = id_life::action;

struct config {
    int callers = 0;          // calls made on the id, each on a thread of its own
    bool move = false;        // a move to another channel of the context
    bool fails = false;       // its migrate call fails
    bool reader_busy = false; // its old reader is busy when the move is ready: the call is made from its strand
    bool close = false;       // a close, on a thread of its own
    bool shutdown = false;    // the context shuts down
    bool synchronous = false; // the id is in synchronous mode: the callers' are blocking calls, the move goes back
};

std::string describe(const config& c) {
    std::string d = std::to_string(c.callers) + " caller(s)";
    if (c.move) d += std::string(", a move") + (c.fails ? " failing" : "") + (c.reader_busy ? " (reader busy)" : "");
    if (c.synchronous) d += ", synchronous";
    if (c.close) d += ", a close";
    if (c.shutdown) d += ", a shutdown";
    return d;
}

template <typename Life>
class model : public rdmacm::test::explored_model<model<Life>> {
    friend class rdmacm::test::explored_model<model>;
    using rdmacm::test::explored_model<model>::fail;

public:
    explicit model(config c) : config_(c), callers_(static_cast<std::size_t>(c.callers)) {
        if (!c.synchronous) return;
        life_.move_begins(); // (a move to synchronous mode made before)
        (void)life_.ready();
        life_.call_begins();
        (void)life_.call_made(true, true);
        (void)life_.ends_move();
    }

private:
    struct caller {
        enum at : std::uint8_t { start, in_call, waiting, done } where = start;
        std::uint32_t seen = 0; // migrate calls made when it was told to wait
    };
    // What runs after a lock section, or on the context, as a step of its own.
    enum class job : std::uint8_t {
        move_on,       // the thread whose call was the last out: migrate_step
        ready_on_read, // migrate_later's job on the old reader's strand
        call_returns,  // rdma_migrate_id returns (no lock held while it ran)
        end_migration, // a move ending without its call (`ec`: refused, or aborted by a close)
        end,           // the move's end (finish_migration), on the context
        abandon,       // the end let go of without having run (its destructor)
        destroy,       // the destroyer
    };

    std::vector<std::function<void()>> enabled() {
        std::vector<std::function<void()>> steps;
        for (std::size_t i = 0; i < callers_.size(); ++i) {
            auto& c = callers_[i];
            if (c.where == caller::start) steps.push_back([this, i] { enter(i); });
            if (c.where == caller::in_call) steps.push_back([this, i] { leave(i); });
            if (c.where == caller::waiting && c.seen != migrate_calls_)
                steps.push_back([this, i] { callers_[i].where = caller::start; });
        }
        if (config_.move && !move_started_ && !gone_) steps.push_back([this] { begin_move(); });
        if (config_.close && !closed_) steps.push_back([this] { close(); });
        if (config_.shutdown && !gone_) steps.push_back([this] { shutdown(); });
        for (std::size_t k = 0; k < jobs_.size(); ++k) steps.push_back([this, k] { run_job(k); });
        return steps;
    }

    void enter(std::size_t i) {
        auto& c = callers_[i];
        c.seen = migrate_calls_;
        if (config_.synchronous) { // call_sync: refused, or admitted and counted
            if (life_.sync_refusal()) {
                c.where = caller::done;
                return;
            }
            life_.enter_admitted_call(true);
            return entered(c);
        }
        switch (life_.enter_call()) {
        case id_life::entry::go: entered(c); break;
        case id_life::entry::wait: c.where = caller::waiting; break;
        case id_life::entry::closed: c.where = caller::done; break;
        }
    }
    void entered(caller& c) {
        if (migrate_in_kernel_) fail("a call made beside rdma_migrate_id");
        if (destroyed_) fail("a call made on a destroyed id");
        ++kernel_calls_;
        c.where = caller::in_call;
    }
    void leave(std::size_t i) {
        --kernel_calls_;
        callers_[i].where = caller::done;
        follow(life_.leave_call(config_.synchronous));
    }

    void begin_move() {
        move_started_ = true;
        if (life_.move_refusal()) return conclude(); // refused: its handler completes
        life_.move_begins();
        // librdmacm's blocking call waits for an event on the private channel the move takes
        // the id off: it would wait for good, or take another's event.
        if (config_.synchronous && kernel_calls_ != 0) fail("a move begun under a blocking call");
        move_began_ = true;
        ready(!config_.reader_busy); // (in the same hold of the lock: migrate_step)
    }
    // migrate_step: the move's call, if it may be made now; `here`: the old reader is idle
    // (or this is its strand), else migrate_later's job.
    void ready(bool here) {
        switch (life_.ready()) {
        case id_life::readiness::call: break;
        case id_life::readiness::wait:
        case id_life::readiness::gone: return;
        }
        if (!here) return queue(job::ready_on_read);
        if (life_.call_refusal(false, false)) return queue(job::end_migration);
        life_.call_begins();
        if (kernel_calls_ != 0) fail("rdma_migrate_id made beside a call");
        if (destroyed_) fail("rdma_migrate_id made on a destroyed id");
        migrate_in_kernel_ = true;
        queue(job::call_returns);
    }
    void call_returns() {
        migrate_in_kernel_ = false;
        const auto todo = life_.call_made(!config_.fails, false);
        ++migrate_calls_; // (a waiting call_guard asks again)
        follow(todo);
        // hand_on::run: the old step posted, then the end (one context: the step is the end's way).
        if (gone_)
            queue(job::abandon); // nowhere to run: let go of
        else
            queue(job::end);
    }
    void end_migration() {
        const auto todo = life_.settle();
        for (auto a : todo) {
            if (a == action::post_end)
                queue(gone_ ? job::abandon : job::end);
            else
                follow({{a}, 1});
        }
    }
    void end() {
        if (!life_.ends_move()) fail("a move's end ran with no settled move");
        conclude();
        follow(life_.destroy_if_due());
    }
    void abandon() {
        if (!life_.ends_move()) return; // (abandon_migration: only a settled move's end owns it)
        conclude();
        follow(life_.destroy_if_due());
    }

    void close() {
        closed_ = true;
        follow(life_.close());
    }
    void shutdown() {
        gone_ = true;
        if (life_.context_gone()) conclude(); // the handler let go of with the others
        // What was queued on the context goes with its queue: a move's end lets go of the move
        // (its destructor); a job on the old reader does nothing (its move was taken above).
        std::erase(jobs_, job::ready_on_read);
        for (auto& j : jobs_)
            if (j == job::end) j = job::abandon;
    }

    void follow(id_life::actions todo) {
        for (auto a : todo) {
            switch (a) {
            case action::move_on: queue(job::move_on); break;
            case action::settle_move: queue(job::end_migration); break;
            case action::post_end: fail("post_end answered outside end_migration"); break;
            case action::submit_destroy:
                if (++submissions_ > 1) fail("the id's destroy submitted twice");
                queue(job::destroy);
                break;
            }
        }
    }

    void run_job(std::size_t k) {
        const job j = jobs_[k];
        jobs_.erase(jobs_.begin() + static_cast<std::ptrdiff_t>(k));
        switch (j) {
        case job::move_on: ready(!config_.reader_busy); break; // (the old reader may be busy again)
        case job::ready_on_read: ready(true); break;
        case job::call_returns: call_returns(); break;
        case job::end_migration: end_migration(); break;
        case job::end: end(); break;
        case job::abandon: abandon(); break;
        case job::destroy:
            if (kernel_calls_ != 0 || migrate_in_kernel_) fail("the id destroyed under a call");
            destroyed_ = true;
            life_.destroyed();
            break;
        }
    }

    void queue(job j) { jobs_.push_back(j); }
    void conclude() {
        if (++move_concluded_ > 1) fail("a move's handler completed twice");
    }

    bool finished() {
        for (auto& c : callers_)
            if (c.where != caller::done) fail("a call waits for good for a migrate call");
        if (move_started_ && move_concluded_ != 1) fail("a move never ends");
        if (life_.moving()) fail("the id is left moving");
        if (closed_ && !destroyed_) fail("a closed id is never destroyed");
        if (!closed_ && submissions_ != 0) fail("an open id destroyed");
        return !this->violation;
    }

    config config_;
    Life life_;
    std::vector<caller> callers_;
    std::vector<job> jobs_;
    bool move_started_ = false, move_began_ = false, closed_ = false, gone_ = false;
    int kernel_calls_ = 0; // librdmacm calls on the id being made (the model's own count)
    bool migrate_in_kernel_ = false;
    bool destroyed_ = false;
    int submissions_ = 0;
    int move_concluded_ = 0;
    std::uint32_t migrate_calls_ = 0;
};

template <typename Life>
exploration explore_all(std::size_t& total) {
    exploration all;
    for (int callers = 0; callers <= 2; ++callers)
        for (bool move : {true, false})
            for (bool fails : {false, true})
                for (bool reader_busy : {false, true})
                    for (bool close : {true, false})
                        for (bool shutdown : {false, true})
                            for (bool synchronous : {false, true}) {
                                if (!move && (fails || reader_busy)) continue;
                                if (synchronous && (callers == 0 || reader_busy))
                                    continue; // (back from it: the target's reader calls)
                                const config c{callers, move, fails, reader_busy, close, shutdown, synchronous};
                                auto e = rdmacm::test::explore([&](auto choose) -> std::optional<std::string> {
                                    model<Life> m(c);
                                    m.run(choose);
                                    return m.violation;
                                });
                                total += e.runs;
                                if (e.violation) {
                                    e.violation = *e.violation + " (" + describe(c) + ")";
                                    return e;
                                }
                                all.runs += e.runs;
                            }
    return all;
}

// A defect put back into the machine: the explorer must find it, breaking `expected`.
template <typename Life>
void expect_found(const std::string& expected) {
    std::size_t total = 0;
    auto e = explore_all<Life>(total);
    BOOST_TEST_MESSAGE("found: " << e.violation.value_or("nothing"));
    BOOST_TEST(e.violation.value_or("").starts_with(expected), e.violation.value_or("nothing"));
}

// The last call out leaves the waiting move where it is.
struct forgets_the_waiting_move : id_life {
    actions leave_call(bool blocking_sync = false) noexcept {
        --calls_;
        if (blocking_sync) sync_call_ = false;
        if (calls_ == 0 && phase_ == move_phase::waiting) phase_ = move_phase::begun;
        return destroy_if_due();
    }
};
// A call does not wait for rdma_migrate_id being made.
struct calls_beside_the_migrate_call : id_life {
    entry enter_call() noexcept {
        if (closed_) return entry::closed;
        ++calls_;
        return entry::go;
    }
};
// The context's shutdown takes a move whose call is being made (the check before
// `in_migrate_call_` was looked at).
struct shutdown_takes_a_calling_move : id_life {
    bool context_gone() noexcept {
        if (phase_ == move_phase::none || phase_ == move_phase::settled) return false;
        phase_ = move_phase::none;
        return true;
    }
};
// A move begun beside a blocking call of synchronous mode (librdmacm's call waits on the
// private channel the move takes the id off).
struct moves_beside_a_blocking_call : id_life {
    rdmacm::error_code move_refusal() const noexcept {
        if (closed_) return rdmacm::errc::not_open;
        if (phase_ != move_phase::none) return rdmacm::errc::operation_in_progress;
        return {};
    }
};
// A close that destroys the id whatever its move is doing (as before the move was counted).
struct close_ignores_the_move : id_life {
    actions close() noexcept {
        if (closed_) return {};
        closed_ = true;
        if (calls_ != 0 || destroy_ != destroy_phase::none) return {};
        destroy_ = destroy_phase::submitted;
        return {{action::submit_destroy}, 1};
    }
};

} // namespace

BOOST_AUTO_TEST_CASE(every_interleaving_of_calls_a_move_a_close_and_a_shutdown_keeps_the_id_s_promises) {
    std::size_t total = 0;
    auto e = explore_all<id_life>(total);
    std::printf("id life explorer: %zu interleavings of calls, a move, a close and a shutdown\n", total);
    BOOST_TEST(!e.violation, e.violation.value_or("") << " after choices " << trace_of(e));
    BOOST_TEST(total > 1000u);
}

BOOST_AUTO_TEST_CASE(the_explorer_finds_a_last_call_that_forgets_the_waiting_move) {
    expect_found<forgets_the_waiting_move>("a move never ends");
}

BOOST_AUTO_TEST_CASE(the_explorer_finds_a_call_made_beside_the_migrate_call) {
    expect_found<calls_beside_the_migrate_call>("a call made beside rdma_migrate_id");
}

BOOST_AUTO_TEST_CASE(the_explorer_finds_a_shutdown_that_takes_a_move_in_its_call) {
    expect_found<shutdown_takes_a_calling_move>("a move's handler completed twice");
}

BOOST_AUTO_TEST_CASE(the_explorer_finds_a_move_begun_beside_a_blocking_call) {
    expect_found<moves_beside_a_blocking_call>("a move begun under a blocking call");
}

BOOST_AUTO_TEST_CASE(the_explorer_finds_a_close_that_destroys_a_moving_id) {
    expect_found<close_ignores_the_move>("the id destroyed under a call");
}
