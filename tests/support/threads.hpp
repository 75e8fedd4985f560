#pragma once
// io_contexts each run by a thread of its own, for tests that check which thread a
// handler runs on. Bounded: stop() (or the destructor) ends them.
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <deque>
#include <boost/test/unit_test.hpp>

#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rdmacm::test {

// Boost.Test's assertions are not thread-safe: handlers running on other threads record
// failed checks here, and the test's own thread reports them (report_thread_checks(),
// called by context_threads::stop()).
inline std::mutex& thread_checks_mutex() {
    static std::mutex m;
    return m;
}
inline std::vector<std::string>& thread_check_failures() {
    static std::vector<std::string> failures;
    return failures;
}
inline void check_from_thread(bool ok, const char* what, const char* file, int line, const std::string& detail = {}) {
    if (ok) return;
    std::lock_guard lock(thread_checks_mutex());
    thread_check_failures().push_back(std::string(file) + ":" + std::to_string(line) + ": " + what +
                                      (detail.empty() ? "" : " (" + detail + ")"));
}
inline void report_thread_checks() {
    std::vector<std::string> failures;
    {
        std::lock_guard lock(thread_checks_mutex());
        failures.swap(thread_check_failures());
    }
    for (auto& f : failures) BOOST_ERROR("check on a handler thread failed: " << f);
}
// An optional second argument (a string) says more, e.g. ec.message().
#define RDMACM_TEST_MT(cond, ...)                                                                                      \
    ::rdmacm::test::check_from_thread(bool(cond), #cond, __FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__)

class context_threads {
public:
    explicit context_threads(int n) : contexts_(static_cast<std::size_t>(n)) {
        for (auto& c : contexts_) {
            guards_.emplace_back(c.get_executor());
            threads_.emplace_back([&c] { c.run_for(limit_); });
        }
        for (auto& t : threads_) ids_.push_back(t.get_id());
    }
    ~context_threads() { stop(); }

    boost::asio::io_context& operator[](std::size_t i) { return contexts_[i]; }
    std::thread::id thread(std::size_t i) const { return ids_[i]; }
    std::size_t size() const { return contexts_.size(); }

    // Lets each context run out of work (everything of ours destroyed), then joins, and
    // checks that each did run out of work: a context still holding some (an operation, an
    // object of ours, a post) runs until run_for's limit and fails the test, named.
    void stop() {
        if (stopped_) return;
        stopped_ = true;
        guards_.clear();
        for (auto& t : threads_)
            if (t.joinable()) t.join();
        report_thread_checks();
        for (std::size_t i = 0; i < contexts_.size(); ++i)
            BOOST_TEST(contexts_[i].stopped(), "context " << i << " of " << contexts_.size()
                                                          << " did not run out of work: its thread ran "
                                                          << limit_.count() << " minutes, then gave up");
    }

private:
    static constexpr std::chrono::minutes limit_{3};
    std::deque<boost::asio::io_context> contexts_;
    std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guards_;
    std::vector<std::thread> threads_;
    std::vector<std::thread::id> ids_;
    bool stopped_ = false;
};

// Waits for a future at most `limit`; false on time-out.
template <typename T>
bool ready_within(std::future<T>& f, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    return f.wait_for(limit) == std::future_status::ready;
}

} // namespace rdmacm::test
