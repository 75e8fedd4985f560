#pragma once
// Fault injection around the real librdmacm and libibverbs, for test binaries linked with
// -Wl,--wrap=<call> (tests/CMakeLists.txt: rdmacm_add_fault_test): an injected call fails
// with the errno given, as the real one reports failures; every other call goes through.
// Nothing of this is in the library.
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

} // namespace rdmacm::test::faults
