// The library's background thread without a device (src/common/destroyer.hpp): a job runs
// there, after its delay if it has one, also when it is submitted while the thread waits
// with nothing pending (a keep-alive's next look, once the last destroy is done: the thread
// once slept through it for good).
#include "common/destroyer.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <future>
#include <thread>

using namespace std::chrono_literals;
using rdmacm::detail::destroy_later;
using rdmacm::detail::run_later;

namespace {
// Submits a job delayed by `delay` and returns how long it took to run (at most 10 s).
std::chrono::steady_clock::duration ran_after(std::chrono::milliseconds delay) {
    std::promise<std::thread::id> ran;
    const auto start = std::chrono::steady_clock::now();
    run_later([&] { ran.set_value(std::this_thread::get_id()); }, delay);
    auto done = ran.get_future();
    BOOST_REQUIRE_MESSAGE(done.wait_for(10s) == std::future_status::ready, "a job delayed " << delay.count()
                                                                                            << " ms never ran");
    BOOST_TEST((done.get() != std::this_thread::get_id()));
    return std::chrono::steady_clock::now() - start;
}
} // namespace

BOOST_AUTO_TEST_CASE(a_delayed_job_runs_after_its_delay_also_when_the_thread_is_idle) {
    // The first starts the thread; each later one finds it idle, nothing pending.
    for (int i = 0; i < 3; ++i) {
        const auto took = ran_after(100ms);
        BOOST_TEST((took >= 100ms), "ran before its delay");
    }
}

BOOST_AUTO_TEST_CASE(a_job_runs_at_once_in_submission_order) {
    std::promise<int> second;
    int first = 0;
    destroy_later([&] { first = 1; });
    destroy_later([&] { second.set_value(first); });
    auto done = second.get_future();
    BOOST_REQUIRE(done.wait_for(10s) == std::future_status::ready);
    BOOST_TEST(done.get() == 1);
}
