#pragma once
// Letting a removed RDMA device go. The kernel removes a device (`rdma link delete`, a
// driver unbind) only once every verbs context on it is closed. librdmacm (rdma-core 44)
// closes its context of a device only when it resyncs its device list (rdma_get_devices)
// after the device has left it and no id uses it any more: nothing else does, so the
// removal would wait for the process to exit (rdma-core's librdmacm/cma.c:
// sync_devices_list, ucma_put_device; seen in the test bed's VM with rxe and siw).
#include <infiniband/verbs.h>

namespace rdmacm::detail {

// Our own objects on a device context (completion queues and channels): librdmacm's
// context must not be closed under them, so a release waits while any is held.
void hold_device(ibv_context* verbs) noexcept;
void unhold_device(ibv_context* verbs) noexcept;

// An id on `verbs` saw DEVICE_REMOVAL and is destroyed: on the destroyer thread, resync
// librdmacm's device list until the device has left it (at most 10 s; once per device).
void release_removed_device(ibv_context* verbs);

} // namespace rdmacm::detail
