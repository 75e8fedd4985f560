#pragma once
// The shared state behind an event_channel: the rdma_event_channel, the strand its reader
// runs on, and the reader itself (compiled in src/channel_impl.cpp).
//
// Lifetime: held by the user's event_channel and by every id on the channel, so it
// outlives them all (ids are destroyed before the channel, semantics R7). The reader runs
// while anybody "owns" the channel (the user's handle, each id on it, each id moving to
// it); when the last owner goes it releases the descriptor (never closing the fd) and the
// last reference destroys the rdma_event_channel. Events name their id by a raw pointer
// (id->context): an id's memory is let go of on the reader's strand after the id was
// destroyed (src/id_impl.cpp), so the reader never routes to a freed id, and never has to
// be waited for.
#include "fd_reader.hpp"

#include <rdma/rdma_cma.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

namespace rdmacm::detail {

class channel_impl : public fd_reader {
public:
    // Creates the channel; throws system_error naming the failed call. The new channel has
    // one owner: the caller.
    static std::shared_ptr<channel_impl> create(const executor_type& ex);
    ~channel_impl() override;

    rdma_event_channel* native() const noexcept { return channel_; }

    // An owner more, by one who holds an owner already (an id made on the channel).
    void add_owner() noexcept { owners_.fetch_add(1, std::memory_order_relaxed); }
    // An owner more, unless the last one has gone (then the reader is stopping, and
    // whatever wanted to own the channel must not count on it: false).
    bool try_add_owner() noexcept;
    void remove_owner() noexcept;

    // Runs f() now, on this thread, if the reader cannot be reading or routing meanwhile:
    // when this thread runs the reader's strand, or while holding the reader's routing
    // lock. Never waits for it: false, f not run, when the reader is busy or the context
    // is gone. (The routing lock is held by the reader while it reads and routes events,
    // handlers run inline included; nobody ever blocks on it but the reader itself, for
    // the length of f.)
    template <typename F>
    bool try_run_exclusive(F&& f) {
        if (on_reader_thread()) { // maybe inside drain(), which holds the routing lock
            f();
            return true;
        }
        std::unique_lock route(route_mutex_, std::try_to_lock);
        if (!route) return false;
        f();
        return true;
    }

    // Keeps the reader out of rdma_get_cm_event until resume_reads(), from any thread:
    // waits out a read in progress (one non-blocking call, made under this lock and
    // nothing else), so never for anything of ours. Not from the reader's own strand
    // inside rdma_get_cm_event (it never is: the lock is only held around that call).
    void pause_reads() noexcept { read_mutex_.lock(); }
    void resume_reads() noexcept { read_mutex_.unlock(); }

    // Reads whatever is queued now. After rdma_migrate_id: the kernel moves the id's queued
    // events onto this channel without waking its pollers, so nothing else would. Kicks
    // before the reader's next read are one: that read takes all they moved.
    void kick() {
        if (kick_pending_.exchange(true, std::memory_order_acq_rel)) return;
        run_on_reader([self = std::static_pointer_cast<channel_impl>(shared_from_this())] { self->read(); });
    }

    // rdma_migrate_id moved an id here: its queued events came along unannounced (above).
    // Each move marks the channel after its call, and looks later (look_after_moves): one
    // look after any number of marks covers them all, so a rebalance moving many ids here
    // at once looks about once, not once per id.
    // (A read-modify-write, not a store: each mark stays in the release sequence the look
    // acquires, so every move marked before a look has its call ordered before the poll.)
    void moved_here() noexcept { look_needed_.exchange(true, std::memory_order_acq_rel); }
    // If a move marked the channel since the last look: whether anything waits (a poll, no
    // read), and a kick if so. True when it kicked.
    bool look_after_moves() {
        if (!look_needed_.exchange(false, std::memory_order_acq_rel) || !has_queued_event(channel_)) return false;
        kick();
        return true;
    }
    // Whether any event waits on `channel`: a fresh poll sees the queue itself, events the
    // kernel moved there without waking its pollers included.
    static bool has_queued_event(const rdma_event_channel* channel) noexcept;

    // Events read, for statistics and tests.
    std::uint64_t events_read() const noexcept { return events_read_.load(std::memory_order_relaxed); }

private:
    channel_impl(const executor_type& ex, rdma_event_channel* ch);
    void on_readable() override { drain(); }
    void drain();

    rdma_event_channel* channel_;
    std::mutex route_mutex_; // held by the reader while it reads and routes events
    std::mutex read_mutex_;  // held around each rdma_get_cm_event, and by pause_reads()
    std::atomic<std::size_t> owners_{1};
    std::atomic<std::uint64_t> events_read_{0};
    std::atomic<bool> kick_pending_{false};
    std::atomic<bool> look_needed_{false}; // moved_here() since the last look
};

} // namespace rdmacm::detail
