#pragma once
// The engine behind a stream (compiled in src/stream/stream_impl.cpp, its read side in
// stream_read.cpp, its write side in stream_write.cpp): a queue pair; the
// ring the peer writes its data into and the receives kept posted for the peer's messages
// (each tells of a write, or of credits); the ring writes fill, whose bytes go by RDMA write
// into the peer's ring; the credits that keep every message within a receive the peer
// posted and every write within what the peer has read of its ring (stream_credits.hpp);
// and the one read and one write that may wait.
//
// Threads: the receives' and sends' completions run on the queue pair's executor (the id's,
// wherever it moves); operations start on any thread. One lock over the state; it is never
// held while a user's handler runs or is destroyed (handlers are posted), and is taken
// before the queue pair's (posts are made under it; the queue pair never calls back under
// its own).
//
// Reads take their bytes (or, in place, their buffer), and prepared writes their buffer, when
// their handler is about to run, on its own executor (as a receive pool's messages are
// taken): a cancellation that reaches a woken read or prepare before then ends it with
// operation_aborted, the bytes left for the next read, no buffer handed out.
#include "common/context_bound.hpp"
#include "stream/stream_credits.hpp"
#include "stream/stream_wire.hpp"
#include "verbs/qp_impl.hpp"

#include "rdmacm/detail/stream_base.hpp"
#include "rdmacm/memory_region.hpp"

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/system_error.hpp>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <tuple>
#include <vector>

namespace rdmacm::detail {

class stream_impl final : public std::enable_shared_from_this<stream_impl>, public context_user {
public:
    using handler = stream_base::handler;
    using shutdown_handler = stream_base::shutdown_handler;
    using fill_handler = stream_base::fill_handler;
    using view_handler = stream_base::view_handler;

    // Registers the rings and the receives' buffers on `qp`'s protection domain and posts
    // the receives; throws system_error ("ibv_reg_mr"; errc::not_open with no queue pair).
    static std::shared_ptr<stream_impl> create(std::shared_ptr<qp_impl> qp, stream_role role,
                                               const stream_options& options);
    // What this side tells the peer: its receives and its ring.
    stream_wire::hello hello() const noexcept;
    // The peer's hello: the client speaks first (a message of credits alone, nudged again
    // until the server answers: siw's first-message race, R9).
    error_code opened(stream_wire::hello peer);

    // The server's accept completed (the client's connect completes before opened()).
    void accepted() noexcept;

    void read(handler h, const mutable_buffer_list& buffers);
    // Hands out the ring's next bytes received (1 to `max_size`) once some arrived; a consume
    // reads what was read of them.
    void read_in_place(view_handler h, std::size_t max_size);
    error_code consume(std::size_t n) noexcept; // (a receive not posted again breaks the stream)
    void write(handler h, const const_buffer_list& buffers);
    // Hands out the send ring's next free bytes (1 to `max_size`) once it has room; a
    // commit sends what was filled of them.
    void prepare_write(fill_handler h, std::size_t max_size);
    error_code commit_write(std::size_t n) noexcept; // (a post that fails breaks the stream)
    // Queues the end of the data; `h` (if any) completes once it and everything before it
    // was sent and acknowledged by the peer's device.
    void shutdown(shutdown_handler h);
    // Ends waiting operations (operation_aborted) and the queue pair.
    void close() noexcept;
    // The context shut down: waiting handlers go, never called, as Asio's do.
    void context_gone() noexcept override;

    boost::asio::any_io_executor executor() const { return qp_->get_executor(); }

private:
    struct memory {
        std::vector<std::byte> buffer;
        memory_region region;
    };
    struct parked_data {
        std::uint32_t slot; // its receive, posted again once its bytes were read
        std::uint32_t left; // its bytes not read yet (the ring's next, in order)
    };
    struct waiting_read {
        handler h;
        mutable_buffer_list buffers;
        std::uint64_t id;
    };
    struct waiting_write {
        handler h;
        const_buffer_list buffers;
        std::uint64_t id;
    };
    struct waiting_fill {
        fill_handler h;
        std::size_t max_size;
        std::uint64_t id;
    };
    struct waiting_view {
        view_handler h;
        std::size_t max_size;
        std::uint64_t id;
    };
    // A read (copied or in place), or a prepared write, whose handler is queued (wake): its id, and whether a
    // cancellation came meanwhile.
    struct woken {
        std::uint64_t id;
        bool cancelled = false;
    };
    enum class end_state : std::uint8_t { none, queued, sent };

    stream_impl(std::shared_ptr<qp_impl> qp, stream_role role, const stream_options& options);
    std::shared_ptr<memory> make_memory(std::size_t bytes, int access = IBV_ACCESS_LOCAL_WRITE) const;

    // Completions (on the queue pair's executor).
    void arrived(std::uint32_t slot, error_code ec, std::size_t bytes);
    void sent(std::uint32_t slot, std::uint32_t bytes, bool short_data, error_code ec);
    void nudge();
    void arm_nudge();             // under the lock
    void stop_nudging() noexcept; // under the lock
    // The keep-alive (options_.keep_alive): a look each interval, on the library's clock
    // thread (run_later: not on a context, which the connection may leave or outlive); a
    // probe when nothing was sent since the last look; its completion.
    void schedule_probe();
    void probe();
    void probed(error_code ec);

    // Under the lock.
    void progress(); // what may go now goes; what may complete is woken
    // Runs `f` (posts, progress()) for a call that returns an error (commit_write, consume):
    // a post that throws breaks the stream, its error returned.
    template <typename F>
    error_code or_break(F f) noexcept {
        try {
            f();
        } catch (const boost::system::system_error& e) { // (a post failed: what it was for cannot go)
            fail(e.code());
            return e.code();
        } catch (const std::bad_alloc&) {
            fail(make_error_code(boost::system::errc::not_enough_memory));
            return broken_;
        }
        return {};
    }
    std::size_t buffer_data(const const_buffer_list& buffers); // bytes copied into the send ring
    // The send ring's free bytes after what was written, up to `most` and to where it wraps.
    boost::asio::mutable_buffer free_space(std::size_t most) noexcept;
    // A read, or a read in place, waits or is handed out: the one read-side operation.
    bool reading() const noexcept { return reader_ || read_woken_ || viewer_ || view_woken_ || lent_ > 0; }
    // A write, or a prepared write, waits or is handed out: the one write-side operation.
    bool writing() const noexcept { return writer_ || filler_ || fill_woken_ || handed_out_ > 0; }
    // The next data message, if one may go: the send ring's bytes not sent yet, as many as
    // the peer's ring has room for, up to the largest message; none while Nagle's rule
    // holds them.
    std::uint32_t next_data() const noexcept;
    bool is_short(std::uint32_t bytes) const noexcept; // a data message Nagle's rule counts
    // A message with no data (credits, end of data), in the one control slot: false while
    // that one is in flight.
    bool send_control(stream_wire::kind what);
    // A message in header slot `slot`, after `bytes` of the send ring written into the peer's
    // ring, as one post.
    void post_message(std::uint32_t slot, stream_wire::kind what, std::uint32_t bytes);
    std::uint32_t control_slot() const noexcept { return options_.send_depth; }
    void repost(std::uint32_t slot);
    // A small message's bytes, where a write would have put them: the ring's next after
    // those told of before (checked: room for them).
    void into_ring(std::span<const std::byte> bytes) noexcept;
    void fail(error_code ec);                            // the first error sticks; what waits is woken
    static error_code as_seen_by_user(error_code cause); // what operations get once broken
    void update_hold() noexcept;                         // the context's work while something waits
    bool may_speak() const noexcept;                     // the server: once the client spoke (siw R10)

    // The operation's id; its handler's cancellation slot, if connected, calls `cancel` with it.
    std::uint64_t on_cancellation(boost::asio::cancellation_slot slot,
                                  void (stream_impl::*cancel)(std::uint64_t) noexcept);
    void cancel_read(std::uint64_t id) noexcept;
    void cancel_write(std::uint64_t id) noexcept;
    void cancel_fill(std::uint64_t id) noexcept;
    void cancel_view(std::uint64_t id) noexcept;
    // The operation `waiting` with `id` ends with operation_aborted (and `nothing...`): at
    // once if it waits, as its handler runs if it was woken (`woken_as`), not if it completed.
    template <typename Waiting, typename... Nothing>
    void cancel_waiting(std::optional<Waiting> stream_impl::*waiting, std::optional<woken> stream_impl::*woken_as,
                        std::uint64_t id, Nothing... nothing) noexcept;
    // A read or prepare's handler, `h`, woken: queued to run `then(*this, h)` on its own
    // executor (else the queue pair's), taking what it was woken for as it is about to run;
    // marked woken (`which`: read_woken_, view_woken_ or fill_woken_) until then. `h` is kept for
    // context_gone when the context has shut down.
    template <typename Handler, typename Then>
    struct woken_call;
    template <typename Handler, typename Then>
    void wake(std::optional<woken> stream_impl::*which, std::uint64_t id, Handler h, Then then);
    void forget(std::optional<woken> stream_impl::*which) noexcept; // woken, its handler destroyed unrun
    bool unwake(std::optional<woken> stream_impl::*which) noexcept; // its handler runs: whether cancelled meanwhile
    void deliver(handler h, const mutable_buffer_list& buffers);    // a read takes the bytes
    // A read in place is handed the ring's bytes received — or ends, nothing handed out, if
    // it was cancelled or the stream closed since it was woken.
    void show(view_handler h, std::size_t most);
    void take_read(std::size_t n); // `n` bytes of the ring read (copied or consumed)
    // A prepared write is handed the send ring's free bytes — or ends, nothing handed out,
    // if it was cancelled or the stream closed or broke since it was woken.
    void hand_out(fill_handler h, std::size_t most);
    // `h` completes with (ec, ...) on the queue pair's executor, never inline.
    void post_completion(handler h, error_code ec, std::size_t n);
    void post_completion(shutdown_handler h, error_code ec);
    void post_completion(fill_handler h, error_code ec, boost::asio::mutable_buffer b);
    void post_completion(view_handler h, error_code ec, boost::asio::const_buffer b);
    template <typename Handler, typename... Args>
    void post_later(Handler h, Args... args);

    std::shared_ptr<qp_impl> qp_;
    const stream_role role_;
    const stream_options options_;
    std::shared_ptr<memory> ring_;         // options_.ring_size bytes: the peer writes its data here
    std::shared_ptr<memory> received_;     // options_.depth receives of a message each
    std::shared_ptr<memory> send_ring_;    // options_.ring_size bytes: writes fill it
    std::shared_ptr<memory> send_headers_; // options_.send_depth + 1 headers (the last: control)

    std::mutex mutex_;
    std::optional<stream_credits> credits_; // once opened
    // The peer's ring, from its hello; the most bytes one message carries (half the smaller
    // ring: one fills while one is in flight).
    std::uint64_t peer_ring_address_ = 0;
    std::uint32_t peer_ring_size_ = 0, peer_rkey_ = 0, largest_message_ = 0;
    // Bytes through the send ring, cumulative: copied in by writes, sent (their messages
    // posted), done (their messages completed: the ring's room again). RC completes sends
    // in order, so `done_` follows `sent_`.
    std::uint64_t staged_ = 0, sent_ = 0, done_ = 0;
    // Bytes through the ring here, cumulative: told of by the peer's messages, read.
    std::uint64_t arrived_ = 0, read_ = 0;
    // The data messages' header slots free; data never takes the control slot, which
    // messages of credits alone need while every data message waits for the window.
    std::vector<std::uint32_t> free_headers_;
    bool control_busy_ = false;
    std::uint64_t posted_sends_ = 0, completed_sends_ = 0;
    // Short data messages sent, not yet completed (Nagle's rule).
    std::uint32_t short_in_flight_ = 0;
    std::uint64_t end_send_ = 0; // posted_sends_ once the end of data was posted
    bool heard_ = false;         // a message of the peer's arrived
    bool answered_ = false;      // the server's first message (its answer to the client's) went
    std::deque<parked_data> data_;
    bool end_heard_ = false;
    error_code broken_;
    end_state end_ = end_state::none;
    std::optional<waiting_read> reader_;
    std::optional<woken> read_woken_, fill_woken_, view_woken_;
    std::optional<waiting_view> viewer_;
    std::size_t lent_ = 0;    // the ring's bytes a read in place handed out, not consumed
    std::uint64_t shown_ = 0; // up to where the ring's bytes were handed out (a consume of some: read_)
    std::optional<waiting_write> writer_;
    std::optional<waiting_fill> filler_;
    std::size_t handed_out_ = 0; // the send ring's bytes a prepared write handed out, not committed
    shutdown_handler shutdown_waiter_;
    std::atomic<std::uint64_t> next_id_{0}; // names operations for their cancellers
    int held_ = 0;                          // what update_hold last told the queue pair
    // Handlers with nowhere to run (the context shutting down), kept for context_gone to
    // destroy outside the lock.
    std::tuple<std::vector<handler>, std::vector<shutdown_handler>, std::vector<fill_handler>,
               std::vector<view_handler>>
        unrun_;
    bool connected_ = false;                               // both sides' queue pairs are connected: a probe may go
    bool probing_ = false;                                 // a probe in flight
    std::uint64_t sends_at_last_probe_ = 0;                // posted_sends_ at the last look
    std::weak_ptr<boost::asio::steady_timer> nudge_timer_; // the client's, until the server answers
    std::chrono::milliseconds nudge_after_{0};
    bool closed_ = false;
};

} // namespace rdmacm::detail
