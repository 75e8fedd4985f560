#include "support/test_device.hpp"

#include <cstdlib>
#include <stdexcept>

namespace rdmacm::test {
namespace {

std::string env(const std::string& name) {
    const char* v = std::getenv(name.c_str());
    return v ? v : "";
}

device find_device() {
    device d{env("RDMACM_TEST_DEVICE"), {}, {}};
    if (d.name.empty()) throw std::runtime_error("RDMACM_TEST_DEVICE is not set: run the RDMA tests through ctest");
    d.ipv4 = env("RDMACM_ADDR_" + d.name);
    d.ipv6 = env("RDMACM_ADDR6_" + d.name);
    if (d.ipv4.empty())
        throw std::runtime_error("RDMA device " + d.name + " is not reachable (RDMACM_ADDR_" + d.name +
                                 " unset): run the tests with tools/test, in the VM or on an RDMA host");
    return d;
}

} // namespace

const device& test_device() {
    static const device d = find_device();
    return d;
}

} // namespace rdmacm::test
