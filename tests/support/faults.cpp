#include "support/faults.hpp"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <map>
#include <mutex>

namespace rdmacm::test::faults {
namespace {

std::mutex mutex;
std::map<std::string, std::pair<int, int>> pending; // call -> (errno, times)

// The errno the next call of `name` fails with, or 0.
int take(const char* name) {
    std::lock_guard lock(mutex);
    auto it = pending.find(name);
    if (it == pending.end()) return 0;
    int err = it->second.first;
    if (--it->second.second == 0) pending.erase(it);
    return err;
}

} // namespace

const std::vector<call>& wrapped() {
    static const std::vector<call> calls{
        {"rdma_create_event_channel", {ENOMEM, EMFILE, ENODEV}},
        {"rdma_create_id", {ENOMEM, ENODEV, EINVAL}},
        {"rdma_bind_addr", {EADDRINUSE, EADDRNOTAVAIL, EINVAL, ENODEV}},
        {"rdma_listen", {EINVAL, EADDRINUSE, ENOMEM}},
        {"rdma_resolve_addr", {EINVAL, ENODEV, EADDRNOTAVAIL, ENOMEM, ENETUNREACH}},
        {"rdma_resolve_route", {EINVAL, ENOMEM, ENODEV}},
        {"rdma_create_qp", {ENOMEM, EINVAL, ENOSPC}},
        {"ibv_create_comp_channel", {ENOMEM, EMFILE}},
        {"ibv_create_cq", {ENOMEM, EINVAL}},
        {"rdma_connect", {EINVAL, ENOMEM, ECONNREFUSED, ENODEV}},
        {"rdma_accept", {EINVAL, ENOMEM}},
        {"rdma_disconnect", {EINVAL, ENOTCONN}},
        {"rdma_migrate_id", {EINVAL, ENOENT, ENXIO, EFAULT, ENODATA}},
        {"rdma_get_cm_event", {ENOMEM, EINVAL}},
    };
    return calls;
}

void inject(const std::string& name, int err, int times) {
    std::lock_guard lock(mutex);
    pending[name] = {err, times};
}

int clear() {
    std::lock_guard lock(mutex);
    int left = 0;
    for (auto& [name, p] : pending) left += p.second;
    pending.clear();
    return left;
}

} // namespace rdmacm::test::faults

using rdmacm::test::faults::take;

// Each wrapper: fail as the real call does (-1 or NULL, errno), else call it.
#define RDMACM_FAULT(ret, fail, name, params, args)                                                                    \
    extern "C" ret __real_##name params;                                                                               \
    extern "C" ret __wrap_##name params {                                                                              \
        if (int e = take(#name)) {                                                                                     \
            errno = e;                                                                                                 \
            return fail;                                                                                               \
        }                                                                                                              \
        return __real_##name args;                                                                                     \
    }

RDMACM_FAULT(rdma_event_channel*, nullptr, rdma_create_event_channel, (), ())
RDMACM_FAULT(int, -1, rdma_create_id, (rdma_event_channel * ch, rdma_cm_id** id, void* ctx, rdma_port_space ps),
             (ch, id, ctx, ps))
RDMACM_FAULT(int, -1, rdma_bind_addr, (rdma_cm_id * id, sockaddr* addr), (id, addr))
RDMACM_FAULT(int, -1, rdma_listen, (rdma_cm_id * id, int backlog), (id, backlog))
RDMACM_FAULT(int, -1, rdma_resolve_addr, (rdma_cm_id * id, sockaddr* src, sockaddr* dst, int ms), (id, src, dst, ms))
RDMACM_FAULT(int, -1, rdma_resolve_route, (rdma_cm_id * id, int ms), (id, ms))
RDMACM_FAULT(int, -1, rdma_create_qp, (rdma_cm_id * id, ibv_pd* pd, ibv_qp_init_attr* attr), (id, pd, attr))
RDMACM_FAULT(ibv_comp_channel*, nullptr, ibv_create_comp_channel, (ibv_context * ctx), (ctx))
RDMACM_FAULT(ibv_cq*, nullptr, ibv_create_cq, (ibv_context * ctx, int cqe, void* user, ibv_comp_channel* ch, int vec),
             (ctx, cqe, user, ch, vec))
RDMACM_FAULT(int, -1, rdma_connect, (rdma_cm_id * id, rdma_conn_param* p), (id, p))
RDMACM_FAULT(int, -1, rdma_accept, (rdma_cm_id * id, rdma_conn_param* p), (id, p))
RDMACM_FAULT(int, -1, rdma_disconnect, (rdma_cm_id * id), (id))
RDMACM_FAULT(int, -1, rdma_migrate_id, (rdma_cm_id * id, rdma_event_channel* ch), (id, ch))
RDMACM_FAULT(int, -1, rdma_get_cm_event, (rdma_event_channel * ch, rdma_cm_event** ev), (ch, ev))
