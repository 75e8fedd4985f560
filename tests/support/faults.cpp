#include "support/faults.hpp"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

namespace rdmacm::test::faults {

struct gate::state {
    std::string name;
    const void* subject;
    bool armed = true;    // the next matching call is held
    bool entered = false; // a call is held now
    bool released = false;
    bool destroyed = false; // its subject was destroyed while held
};

namespace {

struct harness {
    std::mutex mutex;
    std::condition_variable changed;
    std::map<std::string, std::pair<int, int>> pending;                     // call -> (errno, times)
    std::vector<std::shared_ptr<gate::state>> gates;                        // armed or holding
    std::map<std::pair<std::string, const void*>, int> call_count;          // (call, subject) -> calls
    std::map<std::pair<std::string, const void*>, std::set<pid_t>> callers; // (call, subject) -> thread ids
};
// Never destroyed: a library thread may make a wrapped call while the process exits, after
// the statics' destructors ran (exit_test).
harness& the = *new harness;
std::mutex& mutex = the.mutex;
std::condition_variable& changed = the.changed;
auto& pending = the.pending;
auto& gates = the.gates;
auto& call_count = the.call_count;
auto& callers = the.callers;

bool is_destroy_of_subject(const char* name) {
    return std::strcmp(name, "rdma_destroy_id") == 0 || std::strcmp(name, "rdma_destroy_event_channel") == 0;
}

} // namespace

// One wrapped call: counted, held at a gate that matches, failed as injected. Returns
// the errno to fail with, or 0 to make the real call.
int enter(const char* name, const void* subject) {
    std::unique_lock lock(mutex);
    ++call_count[{name, subject}];
    callers[{name, subject}].insert(::gettid());
    changed.notify_all();
    if (is_destroy_of_subject(name))
        for (auto& g : gates)
            if (g->entered && g->subject == subject) g->destroyed = true;
    auto it = std::find_if(gates.begin(), gates.end(), [&](const auto& g) {
        return g->armed && g->name == name && (!g->subject || g->subject == subject);
    });
    if (it != gates.end()) {
        auto g = *it;
        g->armed = false;
        g->entered = true;
        changed.notify_all();
        changed.wait(lock, [&] { return g->released; });
        g->entered = false;
        std::erase(gates, g);
        if (g->destroyed) return EBADF; // the real call would touch freed memory
    }
    auto p = pending.find(name);
    if (p == pending.end()) return 0;
    int err = p->second.first;
    if (--p->second.second == 0) pending.erase(p);
    return err;
}

gate::gate(std::string name, const void* subject) : state_(std::make_shared<state>()) {
    state_->name = std::move(name);
    state_->subject = subject;
    std::lock_guard lock(mutex);
    gates.push_back(state_);
}

gate::~gate() {
    release();
    std::lock_guard lock(mutex);
    std::erase(gates, state_); // never reached: disarmed
}

bool gate::wait_entered(std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, limit, [&] { return state_->entered; });
}

void gate::release() {
    {
        std::lock_guard lock(mutex);
        state_->released = true;
        state_->armed = false;
    }
    changed.notify_all();
}

bool gate::destroyed_while_held() const {
    std::lock_guard lock(mutex);
    return state_->destroyed;
}

// A new object at `subject`'s address: the calls counted on a freed one that lived there
// are not its calls (malloc hands a destroyed id's memory to the next id).
void born(const void* subject) {
    std::lock_guard lock(mutex);
    std::erase_if(call_count, [&](const auto& entry) { return entry.first.second == subject; });
    std::erase_if(callers, [&](const auto& entry) { return entry.first.second == subject; });
}

std::set<pid_t> threads_calling(const std::string& name, const void* subject) {
    std::lock_guard lock(mutex);
    auto it = callers.find({name, subject});
    return it == callers.end() ? std::set<pid_t>{} : it->second;
}

int calls(const std::string& name, const void* subject) {
    std::lock_guard lock(mutex);
    int n = 0;
    for (const auto& [key, count] : call_count)
        if (key.first == name && (!subject || key.second == subject)) n += count;
    return n;
}

bool wait_calls(const std::string& name, const void* subject, int n, std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, limit, [&] {
        int seen = 0;
        for (const auto& [key, count] : call_count)
            if (key.first == name && (!subject || key.second == subject)) seen += count;
        return seen >= n;
    });
}

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

namespace {

// What a successful call created, whose counts start afresh: nothing for most calls.
template <typename Result, typename... Args>
void note_creation(Result, Args...) {}
void note_creation(rdma_event_channel* created) {
    if (created) rdmacm::test::faults::born(created);
}
void note_creation(ibv_comp_channel* created, ibv_context*) {
    if (created) rdmacm::test::faults::born(created);
}
void note_creation(int result, rdma_event_channel*, rdma_cm_id** id, void*, rdma_port_space) { // rdma_create_id
    if (result == 0) rdmacm::test::faults::born(*id);
}
void note_creation(int result, rdma_event_channel*, rdma_cm_event** ev) { // rdma_get_cm_event
    // A connection request's event brings a new id.
    if (result == 0 && (*ev)->event == RDMA_CM_EVENT_CONNECT_REQUEST) rdmacm::test::faults::born((*ev)->id);
}

} // namespace

// Each wrapper: held at a gate, or failed as the real call does (-1 or NULL, errno), else
// the real call, then counted (or held) as "<call> returned". `subject` is what gates and
// counts match on: a destroy's "returned" is counted on the freed object's address, so a
// wait for it must not overlap another object's creation there (born()).
#define RDMACM_WRAP(ret, fail, name, params, args, subject)                                                            \
    extern "C" ret __real_##name params;                                                                               \
    extern "C" ret __wrap_##name params {                                                                              \
        if (int e = rdmacm::test::faults::enter(#name, subject)) {                                                     \
            errno = e;                                                                                                 \
            return fail;                                                                                               \
        }                                                                                                              \
        ret result = __real_##name args;                                                                               \
        note_creation(result RDMACM_AND_ARGS args);                                                                    \
        rdmacm::test::faults::enter(#name " returned", subject);                                                       \
        return result;                                                                                                 \
    }
#define RDMACM_AND_ARGS(...) __VA_OPT__(, ) __VA_ARGS__

RDMACM_WRAP(rdma_event_channel*, nullptr, rdma_create_event_channel, (), (), nullptr)
RDMACM_WRAP(int, -1, rdma_create_id, (rdma_event_channel * ch, rdma_cm_id** id, void* ctx, rdma_port_space ps),
            (ch, id, ctx, ps), ch)
RDMACM_WRAP(int, -1, rdma_bind_addr, (rdma_cm_id * id, sockaddr* addr), (id, addr), id)
RDMACM_WRAP(int, -1, rdma_listen, (rdma_cm_id * id, int backlog), (id, backlog), id)
RDMACM_WRAP(int, -1, rdma_resolve_addr, (rdma_cm_id * id, sockaddr* src, sockaddr* dst, int ms), (id, src, dst, ms), id)
RDMACM_WRAP(int, -1, rdma_resolve_route, (rdma_cm_id * id, int ms), (id, ms), id)
RDMACM_WRAP(int, -1, rdma_create_qp, (rdma_cm_id * id, ibv_pd* pd, ibv_qp_init_attr* attr), (id, pd, attr), id)
RDMACM_WRAP(ibv_comp_channel*, nullptr, ibv_create_comp_channel, (ibv_context * ctx), (ctx), ctx)
RDMACM_WRAP(ibv_cq*, nullptr, ibv_create_cq, (ibv_context * ctx, int cqe, void* user, ibv_comp_channel* ch, int vec),
            (ctx, cqe, user, ch, vec), ctx)
RDMACM_WRAP(int, -1, rdma_connect, (rdma_cm_id * id, rdma_conn_param* p), (id, p), id)
RDMACM_WRAP(int, -1, rdma_accept, (rdma_cm_id * id, rdma_conn_param* p), (id, p), id)
RDMACM_WRAP(int, -1, rdma_disconnect, (rdma_cm_id * id), (id), id)
RDMACM_WRAP(int, -1, rdma_migrate_id, (rdma_cm_id * id, rdma_event_channel* ch), (id, ch), id)
RDMACM_WRAP(int, -1, rdma_destroy_id, (rdma_cm_id * id), (id), id)
RDMACM_WRAP(int, -1, rdma_reject, (rdma_cm_id * id, const void* data, uint8_t length), (id, data, length), id)

// A CM event channel's read that found nothing (a reader's pass ending: EAGAIN) can also be
// held once the real call returned, named "rdma_get_cm_event found nothing"; one that read a
// connection request is counted as "rdma_get_cm_event read a request".
extern "C" int __real_rdma_get_cm_event(rdma_event_channel* ch, rdma_cm_event** ev);
extern "C" int __wrap_rdma_get_cm_event(rdma_event_channel* ch, rdma_cm_event** ev) {
    if (int e = rdmacm::test::faults::enter("rdma_get_cm_event", ch)) {
        errno = e;
        return -1;
    }
    const int result = __real_rdma_get_cm_event(ch, ev);
    note_creation(result, ch, ev);
    if (result == 0 && (*ev)->event == RDMA_CM_EVENT_CONNECT_REQUEST)
        rdmacm::test::faults::enter("rdma_get_cm_event read a request", ch);
    if (result != 0 && errno == EAGAIN) {
        rdmacm::test::faults::enter("rdma_get_cm_event found nothing", ch);
        errno = EAGAIN;
    }
    return result;
}

// A completion channel's read, and a CQ's destroy, can also be held (or counted) once the
// real call returned, named "<call> returned" with the CQ as subject: a read event in a
// reader's hands, not yet counted; a destroy that went through.
extern "C" int __real_ibv_get_cq_event(ibv_comp_channel* ch, ibv_cq** cq, void** ctx);
extern "C" int __wrap_ibv_get_cq_event(ibv_comp_channel* ch, ibv_cq** cq, void** ctx) {
    if (int e = rdmacm::test::faults::enter("ibv_get_cq_event", ch)) {
        errno = e;
        return -1;
    }
    const int result = __real_ibv_get_cq_event(ch, cq, ctx);
    if (result == 0) rdmacm::test::faults::enter("ibv_get_cq_event returned", *cq);
    return result;
}
// ibv_modify_qp reports a failure by its return value, not -1 and errno.
extern "C" int __real_ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask);
extern "C" int __wrap_ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
    if (int e = rdmacm::test::faults::enter("ibv_modify_qp", qp)) return e;
    return __real_ibv_modify_qp(qp, attr, mask);
}
extern "C" int __real_ibv_destroy_cq(ibv_cq* cq);
extern "C" int __wrap_ibv_destroy_cq(ibv_cq* cq) {
    rdmacm::test::faults::enter("ibv_destroy_cq", cq);
    const int result = __real_ibv_destroy_cq(cq);
    if (result != 0) rdmacm::test::faults::enter("ibv_destroy_cq failed", cq); // (counted: one left behind)
    rdmacm::test::faults::enter("ibv_destroy_cq returned", cq);
    return result;
}
