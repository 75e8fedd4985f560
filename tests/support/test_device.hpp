#pragma once
// Which RDMA device (and address) a test runs on: ctest sets RDMACM_TEST_DEVICE per test
// entry, and tools/rdma-env (run by the test bed, or by hand on a host with RDMA) sets the
// device's addresses. A missing device is a test failure, never a skip.
#include <string>

namespace rdmacm::test {

struct device {
    std::string name;
    std::string ipv4; // dotted quad
    std::string ipv6; // empty when the device has no global IPv6 address
};

// The device this test runs on; throws std::runtime_error saying what is missing.
const device& test_device();

} // namespace rdmacm::test
