#include "destroyer.hpp"

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

namespace rdmacm::detail {
namespace {

class destroyer {
public:
    using clock = std::chrono::steady_clock;

    ~destroyer() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_one();
        if (thread_.joinable()) thread_.join();
    }

    void submit(std::function<void()> job, clock::duration delay) {
        {
            std::lock_guard lock(mutex_);
            if (delay > clock::duration::zero())
                delayed_.emplace(clock::now() + delay, std::move(job));
            else
                jobs_.push_back(std::move(job));
            if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
        }
        wake_.notify_one();
    }

private:
    void run() {
        std::unique_lock lock(mutex_);
        for (;;) {
            auto ready = [this] { return stopping_ || !jobs_.empty(); };
            if (delayed_.empty() || stopping_)
                wake_.wait(lock, ready);
            else
                wake_.wait_until(lock, delayed_.begin()->first, ready);
            // Delayed jobs now due join the queue, in their order.
            for (auto now = clock::now(); !delayed_.empty() && delayed_.begin()->first <= now;) {
                jobs_.push_back(std::move(delayed_.begin()->second));
                delayed_.erase(delayed_.begin());
            }
            if (jobs_.empty()) {
                if (stopping_) return; // nothing due left
                continue;
            }
            auto job = std::move(jobs_.front());
            jobs_.pop_front();
            lock.unlock();
            job();
            job = nullptr; // its references go here, not under the lock
            lock.lock();
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::function<void()>> jobs_;
    std::multimap<clock::time_point, std::function<void()>> delayed_;
    bool stopping_ = false;
    std::thread thread_;
};

} // namespace

void destroy_later(std::function<void()> job, std::chrono::steady_clock::duration delay) {
    static destroyer instance;
    instance.submit(std::move(job), delay);
}

} // namespace rdmacm::detail
