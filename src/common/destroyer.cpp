#include "common/destroyer.hpp"

#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

namespace rdmacm::detail {
namespace {

class destroyer {
public:
    using clock = std::chrono::steady_clock;

    // At exit: the jobs due are finished (with any delayed one that falls due while they
    // run), the rest of the delayed ones dropped, and later ones refused.
    void stop() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_one();
        if (thread_.joinable()) thread_.join();
        std::deque<std::function<void()>> late; // submitted as the thread returned: refused too
        {
            std::lock_guard lock(mutex_);
            exited_ = true; // (also when no job ever came: no thread to start now)
            late.swap(jobs_);
        }
    }

    void submit(std::function<void()> job, clock::duration delay) {
        std::function<void()> late; // refused: let go of here, out of the lock
        {
            std::lock_guard lock(mutex_);
            if (exited_) {
                late = std::move(job);
                return;
            }
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
            // Woken by any submit, a delayed one included (it may be due before what the
            // wait was for): the loop looks again. (A wait with the predicate "a job is due"
            // slept through a delayed job submitted while no other was pending.)
            if (!stopping_ && jobs_.empty()) {
                if (delayed_.empty())
                    wake_.wait(lock);
                else
                    wake_.wait_until(lock, delayed_.begin()->first);
            }
            // Delayed jobs now due join the queue, in their order.
            for (auto now = clock::now(); !delayed_.empty() && delayed_.begin()->first <= now;) {
                jobs_.push_back(std::move(delayed_.begin()->second));
                delayed_.erase(delayed_.begin());
            }
            if (jobs_.empty()) {
                if (stopping_) {      // nothing due left
                    delayed_.clear(); // (their references go here, at exit)
                    return;
                }
                continue;
            }
            auto job = std::move(jobs_.front());
            jobs_.pop_front();
            lock.unlock();
            try {
                job();
            } catch (...) {
                // (A job that throws — out of memory making a keep-alive's next look — is
                // dropped; leaving the thread, it would end the process.)
            }
            job = nullptr; // its references go here, not under the lock
            lock.lock();
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::function<void()>> jobs_;
    std::multimap<clock::time_point, std::function<void()>> delayed_;
    bool stopping_ = false;
    bool exited_ = false; // stopped: later jobs are refused (submit)
    std::thread thread_;
};

destroyer& the_destroyer() {
    // Never destroyed: a library thread may submit during exit, after the statics' destructors
    // ran (a blocking call of a closed id returning then); stopped where its destructor would
    // have run (registered as it is made), it refuses such late jobs instead.
    static destroyer* instance = [] {
        auto* d = new destroyer;
        std::atexit([] { the_destroyer().stop(); });
        return d;
    }();
    return *instance;
}

} // namespace

void destroy_later(std::function<void()> job, std::chrono::steady_clock::duration delay) {
    the_destroyer().submit(std::move(job), delay);
}

} // namespace rdmacm::detail
