#include "common/blocking_calls.hpp"

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

namespace rdmacm::detail {
namespace {

constexpr std::size_t most_waiting = 2;

struct threads {
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<std::function<void()>> calls; // each with a waiting thread set aside for it
    std::size_t waiting = 0;                 // threads waiting, less the calls set aside for them
};

threads& pool() {
    static auto* p = new threads; // never destroyed: its threads are detached, and may outlive exit's destructors
    return *p;
}

void work(threads& p, std::function<void()> call) {
    for (;;) {
        call();
        call = nullptr; // what it held goes before the thread waits
        std::unique_lock lock(p.mutex);
        if (p.waiting >= most_waiting) return;
        ++p.waiting;
        p.wake.wait(lock, [&] { return !p.calls.empty(); });
        call = std::move(p.calls.front());
        p.calls.pop_front();
    }
}

} // namespace

void run_blocking(std::function<void()> call) {
    auto& p = pool();
    {
        std::lock_guard lock(p.mutex);
        if (p.waiting > 0) {
            p.calls.push_back(std::move(call));
            --p.waiting; // set aside: no call ever waits behind another
            p.wake.notify_one();
            return;
        }
    }
    std::thread([&p, call = std::move(call)]() mutable { work(p, std::move(call)); }).detach();
}

} // namespace rdmacm::detail
