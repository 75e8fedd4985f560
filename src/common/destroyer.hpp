#pragma once
// Where ids are destroyed: one background thread for the process. librdmacm's and the
// kernel's destroy calls can block (siw holds a connecting id up to its 10 s MPA
// time-out), and no io_context thread may block, so they never run on one.
#include <chrono>
#include <functional>

namespace rdmacm::detail {

// Runs `job` on the destroyer thread, in submission order, after `delay` if one is given
// (never blocking the jobs behind it). At process exit the thread finishes the jobs already
// due and drops the delayed ones; a job submitted after that (by a library thread whose
// blocking call returns during exit) is dropped: let go of on the submitting thread.
void destroy_later(std::function<void()> job, std::chrono::steady_clock::duration delay = {});

} // namespace rdmacm::detail
