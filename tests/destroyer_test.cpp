// The library's background thread without a device (src/common/destroyer.hpp): a job runs
// there, after its delay if it has one, also when it is submitted while the thread waits
// with nothing pending (a keep-alive's next look, once the last destroy is done: the thread
// once slept through it for good).
#include "common/destroyer.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <thread>

using namespace std::chrono_literals;
using rdmacm::detail::destroy_later;
using rdmacm::detail::run_later;

namespace {
// Submits a job delayed by `delay` and returns how long it took to run (at most 10 s). (The
// job holds its promise: one that never ran must not write into this frame later.)
std::chrono::steady_clock::duration ran_after(std::chrono::milliseconds delay) {
    auto ran = std::make_shared<std::promise<std::thread::id>>();
    const auto start = std::chrono::steady_clock::now();
    run_later([ran] { ran->set_value(std::this_thread::get_id()); }, delay);
    auto done = ran->get_future();
    BOOST_REQUIRE_MESSAGE(done.wait_for(10s) == std::future_status::ready,
                          "a job delayed " << delay.count() << " ms never ran");
    BOOST_TEST((done.get() != std::this_thread::get_id()));
    return std::chrono::steady_clock::now() - start;
}
} // namespace

BOOST_AUTO_TEST_CASE(a_delayed_job_runs_after_its_delay_also_when_the_thread_is_idle) {
    // The first starts the thread; each later one finds it idle, nothing pending (it had
    // 50 ms to get back to its wait).
    for (int i = 0; i < 3; ++i) {
        if (i > 0) std::this_thread::sleep_for(50ms);
        const auto took = ran_after(100ms);
        BOOST_TEST((took >= 100ms), "ran before its delay");
    }
}

BOOST_AUTO_TEST_CASE(a_job_runs_at_once_in_submission_order) {
    auto first = std::make_shared<int>(0);
    auto second = std::make_shared<std::promise<int>>();
    destroy_later([first] { *first = 1; });
    destroy_later([first, second] { second->set_value(*first); });
    auto done = second->get_future();
    BOOST_REQUIRE(done.wait_for(10s) == std::future_status::ready);
    BOOST_TEST(done.get() == 1);
}
