#include "verbs/completion_channel.hpp"

#include "common/device_release.hpp"
#include "rdmacm/detail/call_error.hpp"
#include "rdmacm/detail/follow_executor.hpp"

#include <boost/asio/execution/context.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/strand.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <vector>

namespace rdmacm::detail {
namespace {

constexpr unsigned ack_batch = 64; // CQ events acknowledged at once (each ack takes a lock)

// Which reader reads which channel on which context. A leaf lock: under it only the
// readers' own bookkeeping, their construction (the descriptor registered with the
// reactor) and their stop (released from it) — so that a reader made for a channel and a
// context never meets a stopping one still registered there (EEXIST).
struct registry {
    struct entry {
        const context_bound::state* context;
        const completion_channel* channel;
        bool own; // the context's own channel for its device: new CQs report to it
        std::weak_ptr<completion_reader> reader;
        const completion_reader* raw;
    };
    std::mutex mutex;
    std::vector<entry> entries;

    void remove(const completion_reader* r) noexcept { // under the mutex; a no-op if gone
        std::erase_if(entries, [r](const entry& e) { return e.raw == r; });
    }
};

registry& readers() {
    static auto* r = new registry; // never destroyed: readers may outlive static destruction
    return *r;
}

} // namespace

std::shared_ptr<completion_channel> completion_channel::create(ibv_context* verbs) {
    std::shared_ptr<completion_channel> ch(new completion_channel);
    ch->channel_ = ibv_create_comp_channel(verbs);
    if (!ch->channel_) throw boost::system::system_error(RDMACM_CALL_ERROR("ibv_create_comp_channel"));
    ch->verbs_ = verbs;
    hold_device(verbs);
    return ch;
}

completion_channel::~completion_channel() {
    if (!channel_) return;
    ibv_destroy_comp_channel(channel_);
    unhold_device(verbs_);
}

void cq_events::set_sink(std::weak_ptr<cq_event_sink> sink) {
    std::lock_guard lock(mutex_);
    sink_ = std::move(sink);
}

bool cq_events::arm(ibv_cq* cq) {
    {
        std::lock_guard lock(mutex_);
        if (armed_ || destroying_) return true; // (destroying: nothing is to wake)
        armed_ = true;
        channel_->armed.fetch_add(1); // before the event can exist: readers then look for it
    }
    if (ibv_req_notify_cq(cq, 0) == 0) return true;
    // Not armed: the next arm tries again.
    std::lock_guard lock(mutex_);
    if (armed_) {
        armed_ = false;
        channel_->armed.fetch_sub(1);
    }
    return false;
}

std::shared_ptr<cq_event_sink> cq_events::read(ibv_cq* cq) {
    std::unique_lock lock(mutex_);
    if (armed_) {
        armed_ = false;
        channel_->armed.fetch_sub(1);
    }
    if (destroying_) {
        // The destroy waits for this acknowledgement, then frees this object: nothing of it
        // is touched after (the CQ lives until the destroy returns).
        lock.unlock();
        ibv_ack_cq_events(cq, 1);
        return nullptr;
    }
    if (++unacked_ >= ack_batch) {
        ibv_ack_cq_events(cq, unacked_);
        unacked_ = 0;
    }
    return sink_.lock();
}

void cq_events::destroying(ibv_cq* cq) noexcept {
    unsigned unacked;
    {
        std::lock_guard lock(mutex_);
        destroying_ = true;
        if (armed_) { // its event, unread, goes with the CQ (the kernel drops it)
            armed_ = false;
            channel_->armed.fetch_sub(1);
        }
        unacked = std::exchange(unacked_, 0);
    }
    if (unacked) ibv_ack_cq_events(cq, unacked);
}

completion_reader::completion_reader(const executor_type& ex, std::shared_ptr<completion_channel> channel)
    : fd_reader(ex, channel->native()->fd, liveness::operations), channel_(std::move(channel)) {}

completion_reader::~completion_reader() {
    {
        std::lock_guard lock(readers().mutex);
        readers().remove(this);
    }
    detach(); // before the channel (and its fd) may go
}

std::shared_ptr<completion_reader> completion_reader::own(const executor_type& ex, ibv_context* verbs) {
    const auto context = state_of(ex);
    {
        std::lock_guard lock(readers().mutex);
        for (auto& e : readers().entries)
            if (e.context == context.get() && e.own && e.channel->verbs() == verbs)
                if (auto r = e.reader.lock()) {
                    ++r->seats_;
                    return r;
                }
    }
    // Made outside the lock (a system call); one made meanwhile by another thread for the
    // same context is used by its own CQs (two channels then: correct, one fd more).
    return seat(ex, *context, completion_channel::create(verbs), true);
}

std::shared_ptr<completion_reader> completion_reader::of(const executor_type& ex,
                                                         std::shared_ptr<completion_channel> channel) {
    return seat(ex, *state_of(ex), std::move(channel), false);
}

std::shared_ptr<completion_reader> completion_reader::seat(const executor_type& ex, const context_bound::state& context,
                                                           std::shared_ptr<completion_channel> channel, bool own) {
    std::shared_ptr<completion_reader> r;
    {
        std::lock_guard lock(readers().mutex);
        for (auto& e : readers().entries)
            if (e.context == &context && e.channel == channel.get())
                if ((r = e.reader.lock())) {
                    ++r->seats_;
                    return r;
                }
        // Made under the lock: two queue pairs moving to one context at once (a rebalance)
        // share one reader of their channel there (a second would register the fd twice).
        r.reset(new completion_reader(context_executor(ex), std::move(channel)));
        r->seats_ = 1;
        readers().entries.push_back({&context, r->channel_.get(), own, r, r.get()});
    }
    r->start(); // its first read posted: out of our lock
    return r;
}

void completion_reader::leave() {
    {
        std::lock_guard lock(readers().mutex);
        if (--seats_ > 0) return;
    }
    // (Refused when the context is shutting down: its shutdown stops the reader.)
    run_on_reader(
        [self = std::static_pointer_cast<completion_reader>(shared_from_this())] { self->stop_unless_seated(); });
}

void completion_reader::stop_unless_seated() {
    std::lock_guard lock(readers().mutex);
    if (seats_ > 0) return; // taken again meanwhile: reads on
    readers().remove(this);
    stop(); // (the fd released under the lock: a reader made next can register it)
}

// Reads as many events as the channel may hold now — one per CQ armed and not answered
// yet — so that the usual wake-up, one queue pair's one event, makes no read that finds
// nothing. Fewer are there when another context's reader of the channel took one, or a CQ
// is quiet: EAGAIN ends it then. The wait is armed after this pass and looks at the fd as
// it is armed, so an event that comes meanwhile (a CQ armed again by a pass run here)
// brings a pass of its own; and the channel's queue is in order, so the events counted here
// are read before any such one.
bool completion_reader::on_readable() {
    for (int pending = channel_->armed.load(); pending > 0; --pending) {
        ibv_cq* cq = nullptr;
        void* context = nullptr;
        if (ibv_get_cq_event(channel_->native(), &cq, &context) != 0) return errno == EAGAIN;
        if (auto sink = static_cast<cq_events*>(context)->read(cq)) sink->cq_event(*this);
    }
    return true;
}

} // namespace rdmacm::detail
