#include "stream/stream_impl.hpp"

#include "common/destroyer.hpp"
#include "common/dispatch_to_handler.hpp"
#include "common/post_on.hpp"

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>

namespace rdmacm::detail {

namespace {
// The receives wait for messages nobody may have asked for, and nobody waits for a probe:
// they keep the context running no more than a socket's buffer does (a waiting read does:
// update_hold).
constexpr bool standing = true;
// The client's nudges (siw's R9): the first after this, then at twice the wait each time.
constexpr std::chrono::milliseconds first_nudge{100}, last_nudge{1600};
} // namespace

std::shared_ptr<stream_impl> stream_impl::create(std::shared_ptr<qp_impl> qp, stream_role role,
                                                 const stream_options& options) {
    if (!qp || !qp->native()) throw boost::system::system_error(errc::not_open, "stream: its queue pair");
    std::shared_ptr<stream_impl> self(new stream_impl(std::move(qp), role, options));
    self->ring_ = self->make_memory(options.ring_size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    self->received_ = self->make_memory(std::size_t{options.depth} * stream_wire::message_size);
    self->send_ring_ = self->make_memory(options.ring_size);
    self->send_headers_ = self->make_memory((std::size_t{options.send_depth} + 1) * stream_wire::header_size);
    self->qp_->also_tell_when_context_gone(self);
    std::lock_guard lock(self->mutex_);
    for (std::uint32_t slot = 0; slot < options.depth; ++slot) self->repost(slot);
    return self;
}

stream_impl::stream_impl(std::shared_ptr<qp_impl> qp, stream_role role, const stream_options& options)
    : qp_(std::move(qp)), role_(role), options_(options) {}

template <typename Handler, typename... Args>
void stream_impl::post_later(Handler h, Args... args) {
    auto to = qp_->enter_executor(); // (a call into the context until the post is made: W7)
    if (to.executor)
        post_on(to.executor, [h = std::move(h), ex = to.executor, args...]() mutable {
            dispatch_to_handler(std::move(h), ex, args...);
        });
    else
        std::get<std::vector<Handler>>(unrun_).push_back(
            std::move(h)); // (not destroyed under the lock: see context_gone)
}

// The connection broken: the peer speaking something else is said so; any loss of the
// connection is a reset, as on a socket.
error_code stream_impl::as_seen_by_user(error_code cause) {
    return cause == errc::protocol_error ? cause : error_code(boost::asio::error::connection_reset);
}

void stream_impl::post_completion(handler h, error_code ec, std::size_t n) { post_later(std::move(h), ec, n); }
void stream_impl::post_completion(shutdown_handler h, error_code ec) { post_later(std::move(h), ec); }
void stream_impl::post_completion(fill_handler h, error_code ec, boost::asio::mutable_buffer b) {
    post_later(std::move(h), ec, b);
}
void stream_impl::post_completion(view_handler h, error_code ec, boost::asio::const_buffer b) {
    post_later(std::move(h), ec, b);
}

std::shared_ptr<stream_impl::memory> stream_impl::make_memory(std::size_t bytes, int access) const {
    ibv_qp* native = qp_->native();
    if (!native) throw boost::system::system_error(errc::not_open, "stream: its queue pair");
    std::vector<std::byte> buffer(bytes);
    memory_region region(native->pd, buffer, access);
    auto m = std::make_shared<memory>(memory{std::move(buffer), std::move(region)});
    // The device may use the buffers until the queue pair is destroyed; the registration
    // goes then, before the id (as a receive pool's).
    qp_->on_destroyed([m] { m->region.reset(); });
    return m;
}

stream_wire::hello stream_impl::hello() const noexcept {
    return {options_.depth, options_.ring_size, reinterpret_cast<std::uintptr_t>(ring_->buffer.data()),
            ring_->region.rkey()};
}

error_code stream_impl::opened(stream_wire::hello peer) {
    std::lock_guard lock(mutex_);
    if (closed_) return errc::not_open;
    connected_ = role_ == stream_role::client; // (its connect completed; a server's accept is to come)
    peer_ring_address_ = peer.ring_address;
    peer_ring_size_ = peer.ring_size;
    peer_rkey_ = peer.rkey;
    largest_message_ = std::max<std::uint32_t>(1, std::min(options_.ring_size, peer.ring_size) / 2);
    try {
        free_headers_.reserve(options_.send_depth);
        for (std::uint32_t slot = options_.send_depth; slot-- > 0;) free_headers_.push_back(slot);
        credits_.emplace(stream_credit_rules::for_depth(options_.depth), options_.ring_size, peer.depth,
                         peer.ring_size);
        if (role_ == stream_role::client) {
            send_control(stream_wire::kind::credits); // the client speaks first
            nudge_after_ = first_nudge;
            arm_nudge();
        }
        if (options_.keep_alive > std::chrono::milliseconds::zero()) schedule_probe();
    } catch (const boost::system::system_error& e) {
        return e.code();
    } catch (const std::bad_alloc&) {
        return make_error_code(boost::system::errc::not_enough_memory);
    }
    progress();
    return {};
}

// siw may leave the client's first message unread until more data comes (R9): until the
// server's answer arrives, another message of credits alone — each takes a receive the
// server posts again at once, and only while the data window has room.
void stream_impl::nudge() {
    std::lock_guard lock(mutex_);
    if (closed_ || heard_ || broken_) return;
    if (credits_->may_send_data()) send_control(stream_wire::kind::credits);
    if (nudge_after_ >= last_nudge) return;
    nudge_after_ *= 2;
    arm_nudge();
}

// A timer of its own for each wait, held by its handler: it goes with its context (the
// stream may move to another context, and outlive this one), never after it.
void stream_impl::arm_nudge() {
    auto to = qp_->enter_executor(); // (a call into the context until the timer is made)
    if (!to.executor) return;
    auto timer = std::make_shared<boost::asio::steady_timer>(to.executor, nudge_after_);
    nudge_timer_ = timer;
    timer->async_wait([weak = weak_from_this(), timer](error_code ec) {
        if (auto self = weak.lock(); self && !ec) self->nudge();
    });
}

void stream_impl::stop_nudging() noexcept {
    if (auto timer = nudge_timer_.lock()) timer->cancel();
}

void stream_impl::accepted() noexcept {
    std::lock_guard lock(mutex_);
    connected_ = true;
}

void stream_impl::schedule_probe() {
    run_later(
        [weak = weak_from_this()] {
            if (auto self = weak.lock()) self->probe();
        },
        options_.keep_alive);
}

// A zero-length RDMA write takes none of the peer's receives and needs no key; a peer gone
// never acknowledges it, and its retries running out put the queue pair in error, which
// flushes every receive and send: what waits learns of it as from a data send's failure.
void stream_impl::probe() {
    std::lock_guard lock(mutex_);
    if (closed_ || broken_) return; // (and no more looks)
    // Only once connected (both queue pairs take writes by then: the client's connect and
    // the server's accept completed); a send made since the last look probes as well.
    if (connected_ && !probing_ && posted_sends_ == sends_at_last_probe_) {
        qp_->post(
            {work_request::kind::write, {}},
            [self = shared_from_this()](error_code ec, std::size_t) { self->probed(ec); }, standing);
        probing_ = true; // (after: a post that throws leaves none in flight; its completion takes our lock)
    }
    sends_at_last_probe_ = posted_sends_;
    schedule_probe();
}

void stream_impl::probed(error_code ec) {
    std::lock_guard lock(mutex_);
    probing_ = false;
    if (closed_) return;
    if (ec) fail(ec);
    progress();
}

void stream_impl::arrived(std::uint32_t slot, error_code ec, std::size_t bytes) {
    bool close_queue_pair = false;
    {
        std::lock_guard lock(mutex_);
        if (closed_ || broken_) return; // (the rest of a flush)
        if (ec) {
            fail(ec);
        } else {
            const auto message = std::span<const std::byte>(received_->buffer)
                                     .subspan(std::size_t{slot} * stream_wire::message_size, bytes);
            const auto h = stream_wire::parse(message);
            // Data the peer says it wrote beyond what was read of the ring overwrote unread
            // bytes; bytes it says it read were never written to it.
            if (!h || !credits_ || (end_heard_ && h->what == stream_wire::kind::data) ||
                arrived_ + h->length - read_ > options_.ring_size || !credits_->heard({h->posted, h->consumed})) {
                fail(errc::protocol_error);
                close_queue_pair = true; // what the peer sends next finds no receive: its error
            } else {
                if (!heard_) stop_nudging();
                heard_ = true;
                if (h->what == stream_wire::kind::data) {
                    if (message.size() > stream_wire::header_size) into_ring(message.subspan(stream_wire::header_size));
                    data_.push_back({slot, h->length});
                    arrived_ += h->length;
                } else {
                    repost(slot); // (its counts are all it carried)
                }
                if (h->what == stream_wire::kind::end) end_heard_ = true;
            }
        }
        progress();
    }
    if (close_queue_pair) qp_->close();
}

void stream_impl::sent(std::uint32_t slot, std::uint32_t bytes, bool short_data, error_code ec) {
    std::lock_guard lock(mutex_);
    if (short_data) --short_in_flight_;
    if (slot == control_slot())
        control_busy_ = false;
    else
        free_headers_.push_back(slot);
    done_ += bytes; // (RC completes sends in order: these were the send ring's oldest)
    ++completed_sends_;
    if (closed_) return;
    if (ec) fail(ec);
    progress();
}

void stream_impl::progress() {
    if (!credits_ || closed_) return;
    if (broken_) {
        if (writer_) {
            post_completion(std::move(writer_->h), as_seen_by_user(broken_), 0);
            writer_.reset();
        }
        if (filler_) {
            post_completion(std::move(filler_->h), as_seen_by_user(broken_), boost::asio::mutable_buffer());
            filler_.reset();
        }
        if (shutdown_waiter_) post_completion(std::move(shutdown_waiter_), as_seen_by_user(broken_));
    } else {
        if (writer_) {
            if (const std::size_t n = buffer_data(writer_->buffers)) {
                post_completion(std::move(writer_->h), {}, n);
                writer_.reset();
            }
        }
        if (filler_ && free_space(filler_->max_size).size() > 0) {
            auto f = std::move(*filler_);
            filler_.reset();
            wake(&stream_impl::fill_woken_, f.id, std::move(f.h),
                 [most = f.max_size](stream_impl& self, fill_handler h) { self.hand_out(std::move(h), most); });
        }
        if (may_speak()) {
            // What was written goes, in order, as far as the window and the peer's ring let it.
            while (!free_headers_.empty() && credits_->may_send_data()) {
                const std::uint32_t bytes = next_data();
                if (bytes == 0) break;
                const std::uint32_t slot = free_headers_.back();
                free_headers_.pop_back();
                post_message(slot, stream_wire::kind::data, bytes);
            }
            if (end_ == end_state::queued && !writing() && staged_ == sent_ && credits_->may_send_data() &&
                send_control(stream_wire::kind::end)) {
                end_ = end_state::sent;
                end_send_ = posted_sends_;
            }
            // The server answers the client's first message at once (the client nudges until
            // it does); then credits alone go as the rules say.
            const bool answer = role_ == stream_role::server && !answered_;
            if (answer ? credits_->may_send_data() : credits_->credits_due()) send_control(stream_wire::kind::credits);
        }
        // (RC completes sends in order: the end's completion follows every send before it.)
        if (shutdown_waiter_ && end_ == end_state::sent && completed_sends_ >= end_send_)
            post_completion(std::move(shutdown_waiter_), {});
    }
    const bool readable = !data_.empty() || end_heard_ || broken_; // (what a read, copying or in place, waits for)
    if (reader_ && readable) {
        auto r = std::move(*reader_);
        reader_.reset();
        wake(&stream_impl::read_woken_, r.id, std::move(r.h),
             [buffers = r.buffers](stream_impl& self, handler h) { self.deliver(std::move(h), buffers); });
    }
    if (viewer_ && readable) {
        auto v = std::move(*viewer_);
        viewer_.reset();
        wake(&stream_impl::view_woken_, v.id, std::move(v.h),
             [most = v.max_size](stream_impl& self, view_handler h) { self.show(std::move(h), most); });
    }
    update_hold();
}

bool stream_impl::unwake(std::optional<woken> stream_impl::*which) noexcept {
    const bool cancelled = (this->*which)->cancelled;
    (this->*which).reset();
    return cancelled;
}

bool stream_impl::may_speak() const noexcept { return role_ == stream_role::client || heard_; }

void stream_impl::repost(std::uint32_t slot) {
    if (closed_ || broken_) return; // (the queue pair would flush it)
    std::byte* const base = received_->buffer.data() + std::size_t{slot} * stream_wire::message_size;
    const ibv_sge sge{reinterpret_cast<std::uintptr_t>(base), static_cast<std::uint32_t>(stream_wire::message_size),
                      received_->region.lkey()};
    // Held by the receive: the device may write into the buffer until it completes.
    qp_->post(
        {work_request::kind::receive, std::span(&sge, 1)},
        [self = shared_from_this(), slot](error_code ec, std::size_t n) { self->arrived(slot, ec, n); }, standing);
    if (credits_) credits_->reposted(); // (the first `depth` are the hello's)
}

void stream_impl::fail(error_code ec) {
    if (!broken_) broken_ = ec;
}

void stream_impl::update_hold() noexcept {
    // Written bytes not yet sent keep it running too: their writes completed, and nothing
    // else would send them (a socket's kernel would).
    const bool end_waits = end_ == end_state::queued && !broken_ && !closed_;
    const bool bytes_wait = staged_ != sent_ && !broken_ && !closed_;
    const int want = int{reader_.has_value()} + int{viewer_.has_value()} + int{writer_.has_value()} +
                     int{filler_.has_value()} + int{end_waits} + int{bytes_wait} +
                     int{static_cast<bool>(shutdown_waiter_)};
    if (want == held_) return;
    qp_->waiting_beside(want - held_); // the context runs while they wait, wherever the id moves
    held_ = want;
}

// In place before the operation can complete on another thread (as a pool's receive). Every
// type: a read's wait ends with its bytes left for the next read, a write's with nothing
// of it written.
std::uint64_t stream_impl::on_cancellation(boost::asio::cancellation_slot slot,
                                           void (stream_impl::*cancel)(std::uint64_t) noexcept) {
    const std::uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
    if (slot.is_connected())
        slot.assign([weak = weak_from_this(), id, cancel](boost::asio::cancellation_type) {
            if (auto self = weak.lock()) ((*self).*cancel)(id);
        });
    return id;
}

template <typename Waiting, typename... Nothing>
void stream_impl::cancel_waiting(std::optional<Waiting> stream_impl::*waiting,
                                 std::optional<woken> stream_impl::*woken_as, std::uint64_t id,
                                 Nothing... nothing) noexcept {
    std::lock_guard lock(mutex_);
    if (woken_as && this->*woken_as && (this->*woken_as)->id == id) {
        (this->*woken_as)->cancelled = true; // its handler, about to run, finds out: nothing taken or handed out
        return;
    }
    auto& op = this->*waiting;
    if (!op || op->id != id) return; // completed already
    post_completion(std::move(op->h), boost::asio::error::operation_aborted, nothing...);
    op.reset();
    update_hold();
}

void stream_impl::cancel_read(std::uint64_t id) noexcept {
    cancel_waiting(&stream_impl::reader_, &stream_impl::read_woken_, id, std::size_t{0});
}
void stream_impl::cancel_view(std::uint64_t id) noexcept {
    cancel_waiting(&stream_impl::viewer_, &stream_impl::view_woken_, id, boost::asio::const_buffer());
}
void stream_impl::cancel_write(std::uint64_t id) noexcept { // (never woken: copied in as it goes)
    cancel_waiting(&stream_impl::writer_, nullptr, id, std::size_t{0});
}
void stream_impl::cancel_fill(std::uint64_t id) noexcept {
    cancel_waiting(&stream_impl::filler_, &stream_impl::fill_woken_, id, boost::asio::mutable_buffer());
}

void stream_impl::close() noexcept {
    {
        std::lock_guard lock(mutex_);
        if (closed_) return;
        if (reader_) post_completion(std::move(reader_->h), boost::asio::error::operation_aborted, 0);
        if (writer_) post_completion(std::move(writer_->h), boost::asio::error::operation_aborted, 0);
        if (filler_)
            post_completion(std::move(filler_->h), boost::asio::error::operation_aborted,
                            boost::asio::mutable_buffer());
        if (viewer_)
            post_completion(std::move(viewer_->h), boost::asio::error::operation_aborted, boost::asio::const_buffer());
        if (shutdown_waiter_) post_completion(std::move(shutdown_waiter_), boost::asio::error::operation_aborted);
        reader_.reset();
        writer_.reset();
        filler_.reset();
        viewer_.reset();
        handed_out_ = 0;
        lent_ = 0;
        closed_ = true;
        data_.clear(); // their buffers are not posted again
        stop_nudging();
        update_hold();
    }
    qp_->close(); // its receives and sends complete, flushed; their buffers go with them
}

void stream_impl::context_gone() noexcept {
    // Destroyed outside the lock: a coroutine frame they hold may close the stream.
    std::optional<waiting_read> r;
    std::optional<waiting_write> w;
    std::optional<waiting_fill> f;
    std::optional<waiting_view> v;
    shutdown_handler s;
    decltype(unrun_) unrun;
    std::lock_guard lock(mutex_);
    r.swap(reader_);
    w.swap(writer_);
    f.swap(filler_);
    v.swap(viewer_);
    s = std::move(shutdown_waiter_);
    unrun.swap(unrun_);
    update_hold();
}

// What a woken read or prepare runs as its handler is about to run. Destroyed unrun — its
// executor shut down or destroyed first, as Asio allows — it forgets the operation was
// woken, or the stream would wait on it for good (writes failing with operation_in_progress).
template <typename Handler, typename Then>
struct stream_impl::woken_call {
    std::shared_ptr<stream_impl> self;
    std::optional<woken> stream_impl::*which;
    Handler h;
    Then then;

    woken_call(std::shared_ptr<stream_impl> s, std::optional<woken> stream_impl::*w, Handler handler, Then t)
        : self(std::move(s)), which(w), h(std::move(handler)), then(std::move(t)) {}
    woken_call(woken_call&& other) noexcept
        : self(std::move(other.self)), which(other.which), h(std::move(other.h)), then(std::move(other.then)) {}
    woken_call& operator=(woken_call&&) = delete;
    ~woken_call() {
        if (self) self->forget(which); // (the handler goes after, outside the lock)
    }
    void operator()() {
        const auto s = std::move(self); // (ran: nothing to forget)
        then(*s, std::move(h));
    }
};

template <typename Handler, typename Then>
void stream_impl::wake(std::optional<woken> stream_impl::*which, std::uint64_t id, Handler h, Then then) {
    auto to = qp_->enter_executor(); // (from an operation's caller: maybe not the context's thread)
    const auto& ex = to.executor;
    if (!ex) { // the context has shut down: nothing runs there any more
        std::get<std::vector<Handler>>(unrun_).push_back(std::move(h));
        return;
    }
    // On the handler's own executor (at once when that is this one), where `then` takes what
    // it was woken for.
    struct to_handler_executor {
        woken_call<Handler, Then> call;
        boost::asio::any_io_executor ex;
        void operator()() {
            if (const auto own = boost::asio::get_associated_executor(call.h, boost::asio::any_completion_executor()))
                run_on(own, call);
            else
                run_on(ex, call);
        }
    } task{woken_call<Handler, Then>(shared_from_this(), which, std::move(h), std::move(then)), ex};
    try {
        post_on(ex, std::move(task)); // (its memory is allocated before the task moves in)
    } catch (...) {
        task.call.self.reset(); // not queued, nothing to forget: forget() would take the lock held here
        throw;
    }
    this->*which = woken{id}; // (after: a post that throws leaves none woken; its handler takes our lock)
}

void stream_impl::forget(std::optional<woken> stream_impl::*which) noexcept {
    std::lock_guard lock(mutex_);
    (this->*which).reset();
    update_hold();
}

} // namespace rdmacm::detail
