#pragma once
// Completion channels shared by the queue pairs of an execution context (compiled in
// src/verbs/completion_channel.cpp): one fd per context and device, not one per queue pair.
//
// A queue pair's completion queue reports to the channel of the context it was made on,
// for good (a CQ's channel is fixed by ibv_create_cq). A context reads each channel one of
// its queue pairs reports to: its own, and the channels of queue pairs that moved in from
// other contexts. So a queue pair's completions never need the context it came from to
// run, or to exist: its own context reads its channel too. Whichever reader reads a CQ's
// event (two may read one channel; one of them gets it) hands it to the queue pair, which
// polls on its current context's reader.
#include "common/fd_reader.hpp"

#include <infiniband/verbs.h>

#include <atomic>
#include <memory>
#include <cstddef>
#include <mutex>

namespace rdmacm::detail {

class completion_reader;

// What a CQ's events wake: its queue pair.
class cq_event_sink {
public:
    // On the strand of `by`, which read the event (counted already).
    virtual void cq_event(const completion_reader& by) = 0;

protected:
    ~cq_event_sink() = default;
};

// An ibv_comp_channel; lives while a CQ reports to it or a reader reads it.
class completion_channel {
public:
    static std::shared_ptr<completion_channel> create(ibv_context* verbs); // throws system_error
    ~completion_channel();
    completion_channel(const completion_channel&) = delete;
    completion_channel& operator=(const completion_channel&) = delete;

    ibv_context* verbs() const noexcept { return verbs_; }
    ibv_comp_channel* native() const noexcept { return channel_; }

    // CQs of this channel armed and whose event is not read yet: the events a reader may
    // find. A reader reads while there are any, so it never makes the read that finds
    // nothing when the event it was woken for was the last (the usual case: one queue pair).
    std::atomic<int> armed{0};

private:
    completion_channel() = default;
    ibv_context* verbs_ = nullptr; // held (device_release) while the channel lives
    ibv_comp_channel* channel_ = nullptr;
};

// One CQ's events, as readers and its queue pair see them: the CQ's cq_context.
//
// A CQ's destroy waits until every event read from the channel for it is acknowledged
// (ibv_destroy_cq). An event is counted here the moment it is read, under the mutex, and
// the destroy acknowledges what was counted: one read while the destroy runs is seen to be
// so, and acknowledged by its reader at once. This object outlives ibv_destroy_cq (a
// member of whoever destroys the CQ), so a reader can reach it for any event it reads.
class cq_events {
public:
    explicit cq_events(std::shared_ptr<completion_channel> channel) noexcept : channel_(std::move(channel)) {}

    const std::shared_ptr<completion_channel>& channel() const noexcept { return channel_; }
    // The queue pair, once it is made: until then (and after it is gone) events wake nothing.
    void set_sink(std::weak_ptr<cq_event_sink> sink);
    // Asks for the next completion's event (ibv_req_notify_cq), unless the CQ is armed already
    // and its event not yet read (a second arm would queue a second event). Under the CQ's
    // poll lock. False when the device refused: no event will come.
    bool arm(ibv_cq* cq);
    // A reader read an event of `cq`: counted, and whom it wakes (null: nobody).
    std::shared_ptr<cq_event_sink> read(ibv_cq* cq);
    // Before ibv_destroy_cq: acknowledges what was read; readers acknowledge at once from here.
    void destroying(ibv_cq* cq) noexcept;

private:
    std::mutex mutex_;
    unsigned unacked_ = 0; // read, not yet acknowledged (acknowledged in batches)
    bool armed_ = false;   // asked for an event, not read yet
    bool destroying_ = false;
    std::weak_ptr<cq_event_sink> sink_;
    std::shared_ptr<completion_channel> channel_;
};

// Reads one completion channel on one execution context, on a strand where the queue pairs
// it serves (those now on that context whose CQ reports to the channel) poll their CQs.
// Shared by them: each holds a seat; the last to leave stops it.
class completion_reader final : public fd_reader {
public:
    // With one more seat: the reader of `ex`'s context's own channel for `verbs` (the
    // channel made with it on first use), for a new CQ; throws system_error.
    static std::shared_ptr<completion_reader> own(const executor_type& ex, ibv_context* verbs);
    // With one more seat: the reader of `channel` on `ex`'s context, for a queue pair that
    // moved there; throws system_error.
    static std::shared_ptr<completion_reader> of(const executor_type& ex, std::shared_ptr<completion_channel> channel);
    ~completion_reader() override;

    const std::shared_ptr<completion_channel>& channel() const noexcept { return channel_; }
    // One seat less; the last one stops the reader (on its strand, unless a seat was taken
    // again meanwhile: the reader goes on then).
    void leave();

private:
    // Seated at the reader of `channel` on `context` (made if none; `own`: the context's
    // channel for new CQs).
    static std::shared_ptr<completion_reader> seat(const executor_type& ex, const context_bound::state& context,
                                                   std::shared_ptr<completion_channel> channel, bool own);
    completion_reader(const executor_type& ex, std::shared_ptr<completion_channel> channel);
    bool on_readable() override;
    void stop_unless_seated(); // on the strand

    std::shared_ptr<completion_channel> channel_;
    std::size_t seats_ = 0; // under the registry's mutex
};

} // namespace rdmacm::detail
