#pragma once
// Where ids are destroyed: one background thread for the process. librdmacm's and the
// kernel's destroy calls can block (siw holds a connecting id up to its 10 s MPA
// time-out), and no io_context thread may block, so they never run on one.
#include <chrono>
#include <functional>
#include <utility>

namespace rdmacm::detail {

// Runs `job` on the destroyer thread, in submission order, after `delay` if one is given
// (never blocking the jobs behind it). A job that throws is dropped. At process exit the
// thread finishes the jobs already due and drops the delayed ones; a job submitted after
// that (by a library thread whose blocking call returns during exit) is dropped: let go of
// on the submitting thread.
void destroy_later(std::function<void()> job, std::chrono::steady_clock::duration delay = {});

// The same thread, as the library's clock: runs `job` there after `delay`, as destroy_later
// does. For a timer of the library's own that must not depend on a user's context (a
// stream's keep-alive: its connection moves between contexts, any of which may go first).
// A job may wait behind a destroy that blocks (siw: up to its 10-s MPA time-out).
inline void run_later(std::function<void()> job, std::chrono::steady_clock::duration delay) {
    destroy_later(std::move(job), delay);
}

} // namespace rdmacm::detail
