#pragma once
// The shared state behind an event_channel: the rdma_event_channel, the strand its reader
// runs on, and the reader itself (compiled in src/cm/channel_impl.cpp).
//
// Lifetime: held by the user's event_channel and by every id on the channel, so it
// outlives them all (ids are destroyed before the channel, semantics R7). The reader runs
// while anybody "owns" the channel (the user's handle, each id on it, each id moving to
// it); when the last owner goes it releases the descriptor (never closing the fd) and the
// last reference destroys the rdma_event_channel. Events name their id by a raw pointer
// (id->context): an id's memory is let go of on the reader's strand after the id was
// destroyed (src/cm/id_impl.cpp), so the reader never routes to a freed id, and never has to
// be waited for.
#include "common/fd_reader.hpp"
#include "cm/move_machine.hpp"

#include <rdma/rdma_cma.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

namespace rdmacm::detail {

class channel_impl : public fd_reader {
public:
    // Creates the channel; throws system_error naming the failed call. The new channel has
    // one owner: the caller. `keeps`: a user's channel keeps its context running while
    // open; a context's own keeps nothing running by itself (fd_reader's liveness).
    static std::shared_ptr<channel_impl> create(const executor_type& ex, liveness keeps);
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
    // is gone. (The reader claims the route for a whole drain, handlers run inline
    // included, with no lock held meanwhile: see routing_claim. f runs under the routing
    // lock, and nobody ever blocks on that lock but the reader, for the length of f: f
    // must run no user code.)
    template <typename F>
    bool try_run_exclusive(F&& f) {
        if (on_reader_thread()) { // maybe inside drain(), which has claimed the route
            f();
            return true;
        }
        auto route = try_take_route();
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

    // A move's call into this channel is made (rdma_migrate_id returned): the ticket its
    // look (try_look_for_move, read_for_move_then) is made with.
    std::uint64_t moved_here() noexcept { return reads_.ticket(); }
    // The read a move owes its target before it ends (src/cm/migrate.cpp): of the events the
    // kernel moved along unannounced (above), which the moving id holds and delivers before
    // its deferred operations. Skipped when a read that began after the move's call (its
    // `ticket`, moved_here()) drained the channel to EAGAIN: moves made at once read about
    // once (a rebalance). Reads are made one at a time (the route), each move's after
    // its own call, and its end follows it, whatever the other moves into the channel do —
    // review F5: a mark shared between moves let one move's look take another's, whose end
    // then overtook its event.
    // Here, reading nothing (so no handler of anybody's runs here):
    // true when the move need not wait for a read — covered, or nothing queued, seen with
    // the route taken without waiting (no drain between its read and its routing).
    // False when the reader is busy or an event waits: then read_for_move_then.
    bool try_look_for_move(std::uint64_t ticket) noexcept;
    // On the reader's strand (here when the context is gone: nothing reads then): the read,
    // then f. A read stopped short of EAGAIN (a handler run inline threw, or librdmacm's read
    // failed: ENOMEM) goes on from a post (after a pause, for a failed read), and f after it:
    // the move's event may be left.
    template <typename F>
    void read_for_move_then(std::uint64_t ticket, F f) {
        run_on_reader_or_here(
            [self = std::static_pointer_cast<channel_impl>(shared_from_this()), ticket, f = std::move(f)]() mutable {
                if (draining_ == self.get()) return f(); // (here, inside its drain: its context is gone)
                bool done;
                try {
                    routing_claim route(*self);
                    done = self->read_for_move_claimed(ticket);
                } catch (...) {
                    self->read_for_move_then(ticket, std::move(f));
                    throw;
                }
                if (done)
                    f();
                else
                    self->run_on_reader_after_a_pause(
                        [self, ticket, f = std::move(f)]() mutable { self->read_for_move_then(ticket, std::move(f)); });
            });
    }
    // Whether any event waits on `channel`: a fresh poll sees the queue itself, events the
    // kernel moved there without waking its pollers included.
    static bool has_queued_event(const rdma_event_channel* channel) noexcept;

    // The context whose channel's drain this thread is in (null if none): it cannot be
    // destroyed meanwhile, so a hand-over into it is no call from outside.
    static const state* reading_context() noexcept { return draining_ ? draining_->context_state() : nullptr; }

    // Events read, for statistics and tests.
    std::uint64_t events_read() const noexcept { return events_read_.load(std::memory_order_relaxed); }

private:
    channel_impl(const executor_type& ex, rdma_event_channel* ch, liveness keeps);
    bool on_readable() override { return drain(); }
    // Reads to EAGAIN (or until stopped): false if a read failed otherwise (ENOMEM).
    bool drain();
    bool drain_claimed(); // the route claimed
    // The route held (claimed, or the routing lock): whether the move of `ticket` is
    // covered, or nothing is queued.
    bool look(std::uint64_t ticket) noexcept;
    // The route claimed: reads unless look(). Whether the move's read is done (covered now,
    // or the reader stopped: nothing reads any more).
    bool read_for_move_claimed(std::uint64_t ticket);

    // The route: who reads and routes the channel's events, and so may tell a move that
    // none of its id's is being routed. The reader claims it for a read (on its strand),
    // and routes — runs handlers inline, user code — with no lock held: `routing_` says
    // so, set under the routing lock, which the claim takes only for that (waiting out
    // another thread's short exclusive call, if one is being made), and cleared without it
    // (a release: what the read did is seen by whoever takes the route next).
    class routing_claim {
    public:
        explicit routing_claim(channel_impl& channel) : channel_(channel) {
            std::lock_guard route(channel_.route_mutex_);
            channel_.routing_.store(true, std::memory_order_relaxed);
        }
        ~routing_claim() { channel_.routing_.store(false, std::memory_order_release); }
        routing_claim(const routing_claim&) = delete;
        routing_claim& operator=(const routing_claim&) = delete;

    private:
        channel_impl& channel_;
    };
    // Another thread's hold on the route: the routing lock, taken without waiting, unless
    // the reader has claimed the route (empty then).
    std::unique_lock<std::mutex> try_take_route() noexcept {
        std::unique_lock route(route_mutex_, std::try_to_lock);
        if (route && routing_.load(std::memory_order_acquire)) route.unlock();
        return route;
    }

    rdma_event_channel* channel_;
    std::mutex route_mutex_;           // the routing lock: another thread's exclusive call
    std::atomic<bool> routing_{false}; // the reader has claimed the route (set under route_mutex_)
    std::mutex read_mutex_;            // held around each rdma_get_cm_event, and by pause_reads()
    std::atomic<std::size_t> owners_{1};
    std::atomic<std::uint64_t> events_read_{0};
    std::atomic<bool> kick_pending_{false};
    static thread_local const channel_impl* draining_; // whose drain_claimed() this thread is in
    move_reads reads_; // the reads owed to moves into the channel (whoever holds the route)
};

} // namespace rdmacm::detail
