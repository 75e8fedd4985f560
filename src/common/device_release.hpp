#pragma once
// Letting a removed RDMA device go. The kernel removes a device (`rdma link delete`, a
// driver unbind) only once every verbs context on it is closed. librdmacm (rdma-core 44)
// closes its context of a device only when it resyncs its device list (rdma_get_devices)
// after the device has left it and no id uses it any more: nothing else does, so the
// removal would wait for the process to exit (rdma-core's librdmacm/cma.c:
// sync_devices_list, ucma_put_device; seen in the test bed's VM with rxe and siw).
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

namespace rdmacm::detail {

// Our own objects on a device context (completion queues and channels): librdmacm's
// context must not be closed under them, so a release waits while any is held.
void hold_device(ibv_context* verbs) noexcept;
void unhold_device(ibv_context* verbs) noexcept;

// An id on `verbs` saw DEVICE_REMOVAL and is destroyed: on the destroyer thread, resync
// librdmacm's device list until the device has left it (at most 10 s; once per device).
void release_removed_device(ibv_context* verbs);

// A reference on librdmacm's record of `id`'s device, as one more id bound to it holds,
// for a destroy that takes the id before its queue pair: librdmacm deallocates its
// protection domain of a device with the device's last id (ucma_put_device), which fails
// (EBUSY) while a queue pair still uses the domain, and the domain is then forgotten (the
// provider's allocation leaks). With this reference, the domain goes with it, after the
// queue pair. Best effort: none when the stand-in id cannot be made or bound, or lands on
// another device of the same address.
class device_reference {
public:
    explicit device_reference(const rdma_cm_id* id) noexcept;
    ~device_reference();
    device_reference(const device_reference&) = delete;
    device_reference& operator=(const device_reference&) = delete;

private:
    rdma_cm_id* stand_in_ = nullptr;
};

} // namespace rdmacm::detail
