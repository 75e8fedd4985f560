#pragma once
// The library's threads for librdmacm calls that may block — an iWARP connect (a kernel TCP
// connect: ~130 s to an address nobody answers), rdma_disconnect of a connecting id on siw
// (up to its 10 s MPA time-out): never made on an io_context's thread, and never queued
// behind one another. A call takes a waiting thread, or a new one when none waits; a thread
// done with its call waits for the next if fewer than two wait already, else ends — so a
// program that connects out again and again reuses threads instead of making one per call.
// The threads are detached (a blocked call cannot be joined at exit). Not fork-safe: a
// child inherits the count of waiting threads but none of them (fork, then exec).
#include <functional>

namespace rdmacm::detail {

// Runs `call` on a library thread. Throws std::system_error when no thread waits and none can
// be made, std::bad_alloc when the call cannot be queued (`call` is destroyed unrun then).
void run_blocking(std::function<void()> call);

} // namespace rdmacm::detail
