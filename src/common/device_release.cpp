#include "common/device_release.hpp"

#include "common/destroyer.hpp"
#include "rdmacm/endpoint.hpp"

#include <rdma/rdma_cma.h>

#include <map>
#include <mutex>
#include <set>
#include <utility>

namespace rdmacm::detail {
namespace {

using clock = std::chrono::steady_clock;
constexpr auto retry_every = std::chrono::milliseconds(20);
constexpr auto give_up_after = std::chrono::seconds(10);

struct registry {
    std::mutex mutex;
    std::map<ibv_context*, int> holds;
    std::set<ibv_context*> releasing;
};

registry& devices() {
    // Never destroyed: the destroyer's jobs run at exit, and use it (it may have been made
    // after the destroyer, and so would go before it).
    static auto* r = new registry;
    return *r;
}

// Whether librdmacm still lists `verbs` after a resync (false when no device is left:
// then it keeps its list, and the context, until the process exits).
bool still_listed(ibv_context* verbs) {
    int n = 0;
    ibv_context** list = rdma_get_devices(&n);
    if (!list) return false;
    bool listed = false;
    for (int i = 0; i < n; ++i) listed = listed || list[i] == verbs;
    rdma_free_devices(list); // closes the removed device's context if nothing holds it
    return listed;
}

void attempt(ibv_context* verbs, clock::time_point give_up) {
    bool held;
    {
        std::lock_guard lock(devices().mutex);
        held = devices().holds.contains(verbs);
    }
    // While an id on the device lives, the kernel keeps the device listed: so retry until
    // the last one is gone and the device has left the list.
    if ((held || still_listed(verbs)) && clock::now() < give_up) {
        destroy_later([verbs, give_up] { attempt(verbs, give_up); }, retry_every);
        return;
    }
    std::lock_guard lock(devices().mutex);
    devices().releasing.erase(verbs);
}

} // namespace

void hold_device(ibv_context* verbs) noexcept {
    std::lock_guard lock(devices().mutex);
    ++devices().holds[verbs];
}

void unhold_device(ibv_context* verbs) noexcept {
    std::lock_guard lock(devices().mutex);
    auto it = devices().holds.find(verbs);
    if (it != devices().holds.end() && --it->second == 0) devices().holds.erase(it);
}

void release_removed_device(ibv_context* verbs) {
    {
        std::lock_guard lock(devices().mutex);
        if (!devices().releasing.insert(verbs).second) return; // under way
    }
    attempt(verbs, clock::now() + give_up_after);
}

device_reference::device_reference(const rdma_cm_id* id) noexcept {
    // Bound to the id's own address (any port): the kernel binds it to that address's device.
    const int family = id->route.addr.src_addr.sa_family;
    if (family != AF_INET && family != AF_INET6) return; // (AF_IB: none)
    endpoint at = to_endpoint(&id->route.addr.src_addr);
    at.port(0);
    // No channel: synchronous, and a bind has no event to wait for.
    if (rdma_create_id(nullptr, &stand_in_, nullptr, id->ps) != 0) {
        stand_in_ = nullptr;
        return;
    }
    if (rdma_bind_addr(stand_in_, at.data()) != 0 || stand_in_->verbs != id->verbs)
        rdma_destroy_id(std::exchange(stand_in_, nullptr));
}

device_reference::~device_reference() {
    if (stand_in_) rdma_destroy_id(stand_in_);
}

} // namespace rdmacm::detail
