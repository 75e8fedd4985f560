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
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/basic_stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <rdma/rdma_cma.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace rdmacm::detail {

class channel_impl : public std::enable_shared_from_this<channel_impl> {
public:
    using executor_type = boost::asio::any_io_executor;

    // Creates the channel (O_NONBLOCK set here, semantics A4); throws system_error naming
    // the failed call. The new channel has one owner: the caller.
    static std::shared_ptr<channel_impl> create(const executor_type& ex);
    ~channel_impl();
    channel_impl(const channel_impl&) = delete;
    channel_impl& operator=(const channel_impl&) = delete;

    rdma_event_channel* native() const noexcept { return channel_; }
    const executor_type& get_executor() const noexcept { return executor_; }

    void add_owner() noexcept { owners_.fetch_add(1, std::memory_order_relaxed); }
    void remove_owner() noexcept;

    // Runs f on the reader's strand, if the execution context still lives (false if not).
    template <typename F>
    bool run_on_reader(F&& f) {
        std::lock_guard lock(context_->mutex);
        if (!context_->alive) return false;
        boost::asio::post(*strand_, std::forward<F>(f));
        return true;
    }

    // Runs f() now, on this thread, if the reader cannot be reading meanwhile: when this
    // thread runs the reader's strand, or while holding the reader's routing lock (never
    // waited for: false, f not run, when the reader is busy or the context is gone).
    template <typename F>
    bool try_run_exclusive(F&& f) {
        bool on_reader;
        {
            std::lock_guard lock(context_->mutex);
            if (!context_->alive) return false;
            on_reader = strand_->running_in_this_thread();
        }
        if (on_reader) { // maybe inside drain(), which holds the routing lock
            f();
            return true;
        }
        std::unique_lock route(route_mutex_, std::try_to_lock);
        if (!route) return false;
        f();
        return true;
    }

    // Reads whatever is queued now. After rdma_migrate_id: the kernel moves the id's queued
    // events onto this channel without waking its pollers, so nothing else would. Kicks
    // before the reader's next read are one: that read takes all they moved.
    void kick() {
        if (kick_pending_.exchange(true, std::memory_order_acq_rel)) return;
        run_on_reader([self = shared_from_this()] { self->drain(); });
    }

    // Returns once the reader is not routing an event. Called after an id was destroyed
    // (so no event of it can be read any more): then no event still carries its pointer.
    void routing_barrier() { std::lock_guard lock(route_mutex_); }

    // The execution context's state, shared with a service in the context.
    // The execution context's state, shared with a service in the context: whether it
    // lives, and its channels. Channels touch their Asio parts (strand, descriptor) only
    // under this mutex while the context lives; its shutdown resets them under it.
    struct context_state {
        std::mutex mutex;
        bool alive = true;
        std::vector<channel_impl*> channels;
    };

    // Events read, for statistics and tests.
    std::uint64_t events_read() const noexcept { return events_read_.load(std::memory_order_relaxed); }

    // The context is shutting down (its service calls this, holding the state's mutex):
    // let go of the descriptor and the strand now, while their services still exist.
    void context_shutdown() noexcept;

private:
    explicit channel_impl(const executor_type& ex, rdma_event_channel* ch);
    void wait();
    void drain();
    void stop() noexcept;

    rdma_event_channel* channel_;
    executor_type executor_;
    std::optional<boost::asio::strand<executor_type>> strand_;
    std::optional<boost::asio::posix::basic_stream_descriptor<executor_type>> descriptor_;
    std::shared_ptr<context_state> context_;
    std::mutex route_mutex_; // held by the reader while it routes events
    std::atomic<std::size_t> owners_{1};
    std::atomic<std::uint64_t> events_read_{0};
    std::atomic<bool> kick_pending_{false};
    bool stopped_ = false; // on the strand
};

} // namespace rdmacm::detail
