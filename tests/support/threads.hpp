#pragma once
// io_contexts each run by a thread of its own, for tests that check which thread a
// handler runs on. Bounded: stop() (or the destructor) ends them.
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <deque>
#include <future>
#include <thread>
#include <vector>

namespace rdmacm::test {

class context_threads {
public:
    explicit context_threads(int n) : contexts_(static_cast<std::size_t>(n)) {
        for (auto& c : contexts_) {
            guards_.emplace_back(c.get_executor());
            threads_.emplace_back([&c] { c.run_for(std::chrono::minutes(3)); });
        }
        for (auto& t : threads_) ids_.push_back(t.get_id());
    }
    ~context_threads() { stop(); }

    boost::asio::io_context& operator[](std::size_t i) { return contexts_[i]; }
    std::thread::id thread(std::size_t i) const { return ids_[i]; }
    std::size_t size() const { return contexts_.size(); }

    // Lets each context run out of work (everything of ours destroyed), then joins.
    void stop() {
        guards_.clear();
        for (auto& t : threads_)
            if (t.joinable()) t.join();
    }

private:
    std::deque<boost::asio::io_context> contexts_;
    std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guards_;
    std::vector<std::thread> threads_;
    std::vector<std::thread::id> ids_;
};

// Waits for a future at most `limit`; false on time-out.
template <typename T>
bool ready_within(std::future<T>& f, std::chrono::seconds limit = std::chrono::seconds(30)) {
    return f.wait_for(limit) == std::future_status::ready;
}

} // namespace rdmacm::test
