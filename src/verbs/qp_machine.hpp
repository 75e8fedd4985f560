#pragma once
// A queue pair's life as plain code without I/O: whether work may be posted, when the
// device must be told to flush (ibv_modify_qp to the error state), and when the handlers of
// outstanding work requests may go — never while the device may still write into their
// buffers. src/verbs/queue_pair.cpp asks it under the queue pair's lock and does what it answers;
// tests/qp_explorer_test.cpp runs the same code against every interleaving of a model of the
// device, the poller, a closer, a lost connection and a context's shutdown.
#include <cstdint>

namespace rdmacm::detail {

class qp_machine {
public:
    // What the device was told, or did by itself.
    enum class device : std::uint8_t {
        working, // work requests complete as they are done
        erred,   // a work request failed: an RC queue pair is in error, the device flushes the rest
        telling, // a call to the error state is being made (by another thread, maybe)
        told,    // that call returned: the device flushes every work request
        refused, // that call failed: the device may write every posted buffer until the
                 // queue pair is destroyed (a later close or shutdown tells it again)
    };
    enum class posting : std::uint8_t {
        go,              // post it to the device
        refuse_closed,   // not_open, now
        refuse_in_error, // flushed now: nothing polls the queue pair any more (its context is gone)
        queue_in_error,  // never posted (siw may take work on a queue pair in error and never
                         // complete it); flushed by a pass in its turn, after the work posted
                         // before it, which the device may still hold (fresh review F4)
    };

    // What to do with a close(), given whether work requests are outstanding and whether the
    // queue pair's context still runs (a shutdown takes every member's executor before it
    // tells each one, so a close() made by a handler another member's turn destroys sees
    // none: review F2).
    struct close_facts {
        bool outstanding;
        bool context_runs;
    };
    struct closing {
        bool tell;           // tell the device first (then told())
        bool wait_for_flush; // the handlers complete from the flush, polled on the context
        bool let_go_now;     // no context: the handlers go now, never called (after the tell)
    };

    posting post() const noexcept {
        if (closed_) return posting::refuse_closed;
        if (in_error_) return gone_ ? posting::refuse_in_error : posting::queue_in_error;
        return posting::go;
    }

    // A work request completed with an error.
    void failed() noexcept {
        in_error_ = true;
        if (device_ == device::working) device_ = device::erred;
    }

    // The connection is gone, or a work request was cancelled: whether to tell the device
    // now. (A closed queue pair was told by its close; a destroyed one has no device left:
    // a cancellation after an id was destroyed by its last reference, ~id_impl, found by
    // qp_explorer_test.)
    bool lost() noexcept {
        if (closed_ || destroyed_) return false;
        in_error_ = true;
        if (device_ == device::telling || device_ == device::told) return false;
        device_ = device::telling;
        return true;
    }

    closing close(close_facts f) noexcept {
        if (closed_) return {};
        closed_ = true;
        if (!f.context_runs) {
            // Nothing will poll for the flush: the handlers go now, but only once the device
            // was told to let go of their buffers.
            const bool tell = must_tell(f.outstanding);
            if (tell) device_ = device::telling;
            return {.tell = tell, .wait_for_flush = false, .let_go_now = true};
        }
        // (Destroyed before its close: an id whose close never ran, destroyed by its last
        // reference, ~id_impl. The device is gone: a pass aborts what is left.)
        if (!f.outstanding || destroyed_) return {};                             // a pass hands over what is left
        const bool tell = device_ != device::told && device_ != device::telling; // (refused: again)
        if (tell) device_ = device::telling;
        return {.tell = tell, .wait_for_flush = true, .let_go_now = false};
    }

    // The context the queue pair is on shut down: whether to tell the device before the
    // outstanding handlers go. Later posts are refused (and dropped: no executor).
    bool context_gone(bool outstanding) noexcept {
        in_error_ = true;
        gone_ = true;
        const bool tell = must_tell(outstanding);
        if (tell) device_ = device::telling;
        return tell;
    }

    // The call to the error state returned; `heeded`: it succeeded (ibv_modify_qp's result).
    void told(bool heeded) noexcept { device_ = heeded ? device::told : device::refused; }
    // The device had its time to flush (siw never completes work posted after its
    // connection went): a pass flushes what is outstanding.
    void grace_over() noexcept { grace_over_ = true; }
    void destroyed() noexcept { destroyed_ = true; }

    bool closed() const noexcept { return closed_; }
    bool was_destroyed() const noexcept { return destroyed_; }
    bool grace_running() const noexcept { return device_ == device::told && !grace_over_; }
    // Whether handlers taken to go now (a close with no context, a shutdown) may go once the
    // device was told: not while it refused, and is not destroyed — they go with the queue
    // pair's destroy then (review W3: they went, their buffers still the device's).
    bool may_let_go() const noexcept { return device_ != device::refused || destroyed_; }
    // Whether a pass completes every outstanding work request itself (after what it polled,
    // in posting order): the grace is over, or the queue pair is closed and gone.
    bool flushes_outstanding() const noexcept { return grace_over_ || (closed_ && destroyed_); }
    // Whether a pass holds what it polled for later (the id moves, or `by` is not the
    // current poller) — never once closed: held, nothing would hand them over.
    bool holds(bool moving, bool current) const noexcept { return !closed_ && (moving || !current); }
    // Whether the queue pair is done polling: closed, nothing outstanding.
    bool done(bool outstanding) const noexcept { return closed_ && !outstanding; }

private:
    // Whether the device must be told before outstanding handlers go. Not if it was told,
    // or erred by itself; if another thread is telling it right now, its call may not have
    // returned: told again (the call counts, so the queue pair is not destroyed under it).
    bool must_tell(bool outstanding) const noexcept {
        return outstanding && !destroyed_ &&
               (device_ == device::working || device_ == device::telling || device_ == device::refused);
    }

    device device_ = device::working;
    bool closed_ = false;
    bool in_error_ = false;
    bool grace_over_ = false;
    bool destroyed_ = false;
    bool gone_ = false; // the context shut down: nothing polls any more
};

} // namespace rdmacm::detail
