#pragma once
// Where ids are destroyed: one background thread for the process. librdmacm's and the
// kernel's destroy calls can block (siw holds a connecting id up to its 10 s MPA
// time-out), and no io_context thread may block, so they never run on one.
#include <functional>

namespace rdmacm::detail {

// Runs `job` on the destroyer thread, in submission order. At process exit the thread
// finishes the jobs already submitted.
void destroy_later(std::function<void()> job);

} // namespace rdmacm::detail
