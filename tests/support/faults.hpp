#pragma once
// Fault injection and forced interleavings around the real librdmacm and libibverbs, for
// test binaries linked with -Wl,--wrap=<call> (tests/CMakeLists.txt): an injected call
// fails with the errno given, as the real one reports failures; a gated call stops at its
// entry until the test releases it; every other call goes through. Nothing of this is in
// the library.
#include <chrono>
#include <set>
#include <sys/types.h>
#include <memory>
#include <string>
#include <vector>

namespace rdmacm::test::faults {

// The wrapped calls, each with the errnos its manual page and the kernel's ucma.c give it.
struct call {
    std::string name;
    std::vector<int> errnos;
};
const std::vector<call>& wrapped();

// The next `times` calls of `name` fail with `err`.
void inject(const std::string& name, int err, int times = 1);
// No more failures; how many injected ones were not reached.
int clear();

// Holds the next call of `name` on `subject` (its first argument: an rdma_cm_id*, an
// event channel, …; any when null) at its entry, on whichever thread makes it, until
// release() (or the gate's end): a test then knows exactly where that thread is, and can
// do something on another thread meanwhile. While a call is held, a destroy of its subject
// (rdma_destroy_id, rdma_destroy_event_channel) is a use-after-free in the making: it is
// recorded (destroyed_while_held()) and the held call, released, fails with EBADF instead
// of touching freed memory.
class gate {
public:
    explicit gate(std::string name, const void* subject = nullptr);
    ~gate(); // releases
    gate(const gate&) = delete;
    gate& operator=(const gate&) = delete;

    // Whether a thread is held there now (waits up to `limit` for one to come).
    bool wait_entered(std::chrono::milliseconds limit = std::chrono::milliseconds(10'000));
    void release();
    // Whether the subject was destroyed while the call was held.
    bool destroyed_while_held() const;

    struct state;

private:
    std::shared_ptr<state> state_;
};

// How many times `name` was called (successfully or not) on `subject` (any when null),
// counted from the first use of the harness — or, for an id, an event channel or a
// completion channel, from its creation: memory a destroyed one leaves is often the next
// one's, and its calls are not the new one's. (So a count over every subject can go down,
// and a wait for a destroy's count must not overlap the creation of another object.)
int calls(const std::string& name, const void* subject = nullptr);
// Forgets the calls counted on `subject`: a new object lives at that address (the wrapped
// calls that create one say so).
void born(const void* subject);
// The threads (kernel thread ids: not reused within a run this short) that made calls of
// `name` on `subject`, counted as calls() are.
std::set<pid_t> threads_calling(const std::string& name, const void* subject);
// Waits up to `limit` until calls(name, subject) >= n.
bool wait_calls(const std::string& name, const void* subject, int n,
                std::chrono::milliseconds limit = std::chrono::milliseconds(10'000));

} // namespace rdmacm::test::faults
