#pragma once
// The shared state behind an event_channel: the rdma_event_channel, the strand its reader
// runs on, and the reader itself (compiled in src/channel_impl.cpp).
//
// Lifetime: held by the user's event_channel and by every id on the channel, so it
// outlives them all (ids are destroyed before the channel, semantics R7). The reader runs
// while anybody "owns" the channel; when the last owner goes it releases the descriptor
// (never closing the fd) and the last reference destroys the rdma_event_channel.
// Ids are destroyed on a background thread (src/destroyer.hpp), which may hold the last
// reference after the execution context is gone: the Asio parts (descriptor, posts to the
// strand) are only touched while the context lives, the descriptor goes with it.
#include "rdmacm/detail/fd_reader.hpp"

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

    void add_owner() noexcept { owners_.fetch_add(1, std::memory_order_relaxed); }
    void remove_owner() noexcept;

    // Runs f() now, on this thread, if the reader cannot be reading meanwhile: when this
    // thread runs the reader's strand, or while holding the reader's routing lock (never
    // waited for: false, f not run, when the reader is busy or the context is gone).
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
    // waits out a read in progress (one non-blocking call, which never waits for anything
    // of ours — unlike the routing lock, held while events are routed, so never a
    // deadlock), and reads nothing more until resumed. Pauses nest.
    void pause_reads() noexcept;
    // Ends a pause; reads what the reader left while paused.
    void resume_reads();

    // Reads whatever is queued now. After rdma_migrate_id: the kernel moves the id's queued
    // events onto this channel without waking its pollers, so nothing else would. Kicks
    // before the reader's next read are one: that read takes all they moved.
    void kick() {
        if (kick_pending_.exchange(true, std::memory_order_acq_rel)) return;
        run_on_reader([self = std::static_pointer_cast<channel_impl>(shared_from_this())] { self->drain(); });
    }

    // Returns once the reader is not routing an event. Called after an id was destroyed
    // (so no event of it can be read any more): then no event still carries its pointer.
    void routing_barrier() { std::lock_guard lock(route_mutex_); }

    // Events read, for statistics and tests.
    std::uint64_t events_read() const noexcept { return events_read_.load(std::memory_order_relaxed); }

private:
    channel_impl(const executor_type& ex, rdma_event_channel* ch);
    void on_readable() override { drain(); }
    void drain();
    // Before each read in drain(): false while paused (the reader then yields: the last
    // resume reads on).
    bool enter_read() noexcept;

    rdma_event_channel* channel_;
    std::mutex route_mutex_; // held by the reader while it routes events
    std::atomic<std::size_t> owners_{1};
    std::atomic<std::uint64_t> events_read_{0};
    std::atomic<bool> kick_pending_{false};
    // Pausing: a Dekker pair (sequentially consistent) — the reader announces a read and
    // then looks for a pause, a pauser announces its pause and then looks for a read.
    std::atomic<int> paused_{0};
    std::atomic<bool> in_read_{false};
    std::atomic<bool> yielded_{false}; // the reader stopped for a pause
};

} // namespace rdmacm::detail
