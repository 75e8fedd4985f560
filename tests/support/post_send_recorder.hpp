#pragma once
// What the provider is handed for chosen queue pairs: a recorder put in their device
// context's post_send (ibv_post_send calls through it) for its life, keeping each work
// request's send_flags. One at a time. Nothing of this is in the library.
#include <infiniband/verbs.h>

#include <map>
#include <mutex>
#include <vector>

namespace rdmacm::test {

class post_send_recorder {
public:
    // Records for `qps`, all on one device context.
    explicit post_send_recorder(std::vector<ibv_qp*> qps) : context_(qps.front()->context) {
        std::lock_guard lock(mutex());
        for (ibv_qp* qp : qps) flags_[qp];
        provider() = context_->ops.post_send;
        current() = this;
        context_->ops.post_send = &record;
    }
    ~post_send_recorder() {
        std::lock_guard lock(mutex());
        context_->ops.post_send = provider();
        current() = nullptr;
    }
    post_send_recorder(const post_send_recorder&) = delete;
    post_send_recorder& operator=(const post_send_recorder&) = delete;

    // The send_flags of each request posted on `qp`, in order.
    std::vector<unsigned> flags(ibv_qp* qp) const {
        std::lock_guard lock(mutex());
        return flags_.at(qp);
    }
    void clear() {
        std::lock_guard lock(mutex());
        for (auto& [qp, f] : flags_) f.clear();
    }

private:
    static std::mutex& mutex() {
        static std::mutex m;
        return m;
    }
    static post_send_recorder*& current() {
        static post_send_recorder* r = nullptr;
        return r;
    }
    // The provider's own (kept after the recorder: a post already in `record` goes on to it).
    using post_send_fn = int (*)(ibv_qp*, ibv_send_wr*, ibv_send_wr**);
    static post_send_fn& provider() {
        static post_send_fn f = nullptr;
        return f;
    }
    static int record(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
        post_send_fn to;
        {
            std::lock_guard lock(mutex());
            to = provider();
            if (post_send_recorder* self = current())
                if (auto it = self->flags_.find(qp); it != self->flags_.end())
                    for (ibv_send_wr* w = wr; w; w = w->next) it->second.push_back(w->send_flags);
        }
        return to(qp, wr, bad);
    }

    ibv_context* context_;
    std::map<ibv_qp*, std::vector<unsigned>> flags_;
};

} // namespace rdmacm::test
