#include "rdmacm/queue_pair.hpp"

#include "rdmacm/detail/call_error.hpp"
#include "common/destroyer.hpp"
#include "common/device_release.hpp"
#include "common/dispatch_to_handler.hpp"
#include "verbs/qp_impl.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <array>
#include <new>
#include <stdexcept>

namespace rdmacm {
namespace detail {
namespace {

constexpr int poll_batch = 16; // work completions taken per ibv_poll_cq
// How long the device has to flush the work requests of a lost connection (or a closed
// queue pair) before the rest are flushed here: siw never completes those posted after its
// connection went.
constexpr auto flush_grace = std::chrono::milliseconds(100);
// How long a polling reader polls before the context's other handlers get their turn.
constexpr auto spin_slice = std::chrono::microseconds(50);

} // namespace

// The queue pair's seat at a reader on one execution context: passes run on the reader's
// strand (and its storage is kept from pass to pass). Leaving the seat when it goes lets
// the reader stop once no queue pair on its context reports to its channel.
class qp_impl::poller {
public:
    // Seated by `seat()` (completion_reader::own or of) once its own memory is in hand: a
    // failure leaves no seat taken.
    template <typename Seat>
    explicit poller(Seat seat) : reader(seat()) {}
    ~poller() { reader->leave(); }
    poller(const poller&) = delete;
    poller& operator=(const poller&) = delete;

    template <typename F>
    bool run_on_reader(F&& f) {
        return reader->run_on_reader(std::forward<F>(f));
    }

    const std::shared_ptr<completion_reader> reader;
    // Polling mode, on the strand: whether a chain of spin slices runs, and when it last
    // found a completion (or was woken).
    bool spinning = false;
    std::chrono::steady_clock::time_point last_found;
    // On the strand: a pass after a pause is to try a refused arm again (one at a time,
    // whatever else wakes the queue pair meanwhile).
    bool rearm_waits = false;
    // poll()'s storage, kept from pass to pass.
    std::vector<polled_completion> polled;
    std::vector<completion> done;
};

qp_impl::cq_resources::~cq_resources() {
    if (!cq) return;
    events.destroying(cq); // destroy_cq waits for every event read to be acknowledged
    ibv_destroy_cq(cq);
}

std::shared_ptr<qp_impl> qp_impl::create(const std::shared_ptr<id_impl>& id, const queue_pair_options& options) {
    if (options.max_send_sge == 0 || options.max_recv_sge == 0) // (every operation would be refused)
        throw boost::system::system_error(make_error_code(boost::system::errc::invalid_argument),
                                          "queue_pair_options: max_send_sge and max_recv_sge must be at least 1");
    const auto id_closed = [] { return boost::system::system_error(errc::not_open, "queue_pair: its CM id"); };
    if (!id || id->closed()) throw id_closed();
    id_impl::call_guard guard(*id); // a close() meanwhile cannot destroy the id under us
    rdma_cm_id* cm = guard.id();
    if (!cm) throw id_closed();
    if (!cm->verbs) throw boost::system::system_error(errc::no_device, "queue_pair");
    const auto ex = id->get_executor();
    // The context's channel for the device: its reader seated here, left if anything fails.
    auto seat = std::make_shared<poller>([&] { return completion_reader::own(ex, cm->verbs); });
    auto res = std::make_shared<cq_resources>(seat->reader->channel());
    res->cq = ibv_create_cq(cm->verbs, static_cast<int>(options.max_send_wr + options.max_recv_wr), &res->events,
                            seat->reader->channel()->native(), 0);
    if (!res->cq) throw boost::system::system_error(RDMACM_CALL_ERROR("ibv_create_cq"));

    ibv_qp_init_attr attr{};
    attr.qp_type = IBV_QPT_RC;
    attr.send_cq = attr.recv_cq = res->cq;
    attr.cap.max_send_wr = options.max_send_wr;
    attr.cap.max_recv_wr = options.max_recv_wr;
    attr.cap.max_send_sge = options.max_send_sge;
    attr.cap.max_recv_sge = options.max_recv_sge;
    attr.cap.max_inline_data = options.max_inline_data;
    // An RDMA read's scatter list has a bound of its own (siw: one entry).
    ibv_device_attr device{};
    if (int e = ibv_query_device(cm->verbs, &device))
        throw boost::system::system_error(RDMACM_CALL_ERRNO("ibv_query_device", e));
    if (rdma_create_qp(cm, options.pd, &attr) != 0)
        throw boost::system::system_error(RDMACM_CALL_ERROR("rdma_create_qp"));
    // Out of memory here, the queue pair goes before the completion queue it uses (`res`
    // still holds it), whose destroy fails while it does (EBUSY: it would stay). From then on
    // the id keeps the qp_impl, closed or not (attach), and its destroy takes the queue pair
    // first.
    std::shared_ptr<qp_impl> self;
    try {
        self = std::make_shared<qp_impl>(passkey<qp_impl>{}, ex, res, options.poll_for);
    } catch (...) {
        rdma_destroy_qp(cm);
        throw;
    }
    self->qp_ = cm->qp;
    // What it was made with (at least what was asked for), within what one operation takes;
    // inline, what was asked (a device may grant some unasked: soft-RoCE 16 bytes an entry).
    const auto limit = [](std::uint32_t n) { return std::min<std::uint32_t>(n, max_buffers_per_operation); };
    self->limits_ = {
        limit(attr.cap.max_send_sge), limit(attr.cap.max_recv_sge),
        limit(std::min<std::uint32_t>(attr.cap.max_send_sge, static_cast<std::uint32_t>(device.max_sge_rd))),
        std::min(options.max_inline_data, attr.cap.max_inline_data)};
    self->poller_ = std::move(seat); // before a move's end may replace it (attach)
    const auto first = self->poller_;
    self->executor_.set_user(self);
    self->resources_->events.set_sink(self);
    // From here the completion queue outlives the queue pair.
    if (!id->attach(self)) throw id_closed(); // closed meanwhile
    // Armed once the events it brings wake the queue pair (nothing is posted yet); refused,
    // a pass on the reader's strand goes to sleep again, trying it again after a pause.
    bool armed;
    {
        std::lock_guard poll_lock(self->resources_->poll_mutex);
        armed = self->resources_->events.arm(self->resources_->cq);
    }
    if (!armed) {
        try {
            self->wake_later(first);
        } catch (const std::bad_alloc&) {
            // Out of memory too: the queue pair is the id's already, and is returned; it stays
            // unarmed (deaf to completions) until a pass runs for it — its move, its close.
        }
    }
    return self;
}

qp_impl::qp_impl(passkey<qp_impl>, const executor_type& ex, std::shared_ptr<cq_resources> res,
                 std::chrono::nanoseconds poll_for)
    : resources_(std::move(res)), poll_for_(poll_for), executor_(ex) {}

qp_impl::~qp_impl() = default;

// A verbs call on the queue pair is in flight from here until end_verbs_call(): the id's
// destroy (after close(), which lets none start) waits for it in wait_idle().
void qp_impl::begin_verbs_call() noexcept { verbs_calls_.fetch_add(1); }

void qp_impl::end_verbs_call() noexcept {
    // Dekker with close() + wait_idle(): either this sees closing_, or the waiter sees 0.
    if (verbs_calls_.fetch_sub(1) == 1 && closing_.load()) verbs_calls_.notify_all();
}

void qp_impl::wait_idle() noexcept {
    for (int n; (n = verbs_calls_.load()) != 0;) verbs_calls_.wait(n);
}

error_code qp_impl::refusal(work_request::kind what, const gathered_buffers& found) const noexcept {
    using enum work_request::kind;
    const std::uint32_t most = what == send || what == write ? limits_.send
                               : what == receive             ? limits_.receive
                                                             : limits_.read;
    if (found.count > most) return errc::too_many_buffers;
    if (!found.registered) return errc::buffer_not_registered;
    if (found.bytes > max_message_size) return make_error_code(boost::system::errc::message_size);
    if ((what == write || what == read) && found.bytes > found.remote_length) return errc::remote_buffer_too_small;
    return {};
}

// Whether a send's or write's bytes are few enough for the provider to copy into the work
// request at the post: then the device need not look up their region, nor read them when it
// sends. (None for a request without bytes: nothing to copy.)
bool qp_impl::fits_inline(std::span<const ibv_sge> buffers) const noexcept {
    if (limits_.inline_bytes == 0) return false; // (none asked: no sum on every post)
    std::uint64_t bytes = 0;
    for (const ibv_sge& b : buffers) bytes += b.length;
    return bytes > 0 && bytes <= limits_.inline_bytes;
}

void qp_impl::post(const work_request& wr, handler h, bool standing) {
    post(std::span(&wr, 1), std::move(h), standing);
}

void qp_impl::post(std::span<const work_request> chain, handler h, bool standing) {
    constexpr std::size_t most = 4; // (the stream's longest is three: two writes and a send)
    if (chain.empty() || chain.size() > most) throw std::length_error("qp_impl::post: a chain of 1 to 4");
    std::unique_lock lock(mutex_);
    if (const auto verdict = machine_.post(); verdict != qp_machine::posting::go) {
        if (verdict == qp_machine::posting::queue_in_error) {
            // Flushed in its turn by a pass (fresh review F4: refused at once, it completed
            // before the work posted earlier, which the device may still hold — a user
            // taking that to mean the older ones were done freed their buffers).
            outstanding_.insert(std::move(h), false, standing);
            update_busy();
            auto current = poller_; // (not closed: it has one)
            lock.unlock();
            wake_later(current); // (its context shutting down: context_gone drops it)
            return;
        }
        auto to = executor_.enter(); // (a call into the context until the post is made)
        error_code ec = verdict == qp_machine::posting::refuse_closed
                            ? error_code(errc::not_open)
                            : error_code(IBV_WC_WR_FLUSH_ERR, work_completion_category());
        lock.unlock();
        refuse(to.executor, std::move(h), ec);
        return;
    }
    auto slot = boost::asio::get_associated_cancellation_slot(h);
    const std::uint64_t wr_id =
        outstanding_.insert(std::move(h), true, standing); // before the post: its completion cannot beat it
    // Before the handler can complete on another thread (assigned after, it would replace
    // the slot's handler for the handler's next operation). One emitted after the
    // completion finds nothing outstanding and does nothing.
    if (slot.is_connected())
        slot.assign([weak = weak_from_this(), wr_id](boost::asio::cancellation_type type) {
            if ((type & boost::asio::cancellation_type::terminal) == boost::asio::cancellation_type::none)
                return; // a work request cannot be recalled: partial and total cancellation do nothing
            if (auto self = weak.lock()) self->cancel(wr_id);
        });
    update_busy();
    begin_verbs_call();
    lock.unlock();

    error_code ec;
    if (chain.front().what == work_request::kind::receive) {
        ibv_recv_wr r{};
        ibv_recv_wr* bad = nullptr;
        r.wr_id = wr_id;
        r.sg_list = const_cast<ibv_sge*>(chain.front().buffers.data()); // (verbs' lists are not const; never written)
        r.num_sge = static_cast<int>(chain.front().buffers.size());
        if (int e = ibv_post_recv(qp_, &r, &bad)) ec = RDMACM_CALL_ERRNO("ibv_post_recv", e);
    } else {
        // One post for the chain (one doorbell); only its last is signalled. Each carries the
        // handler's id: one that fails completes with its error whether signalled or not, and
        // what is flushed after it finds the handler taken.
        std::array<ibv_send_wr, most> s{};
        const std::size_t n = chain.size();
        for (std::size_t i = 0; i < n; ++i) {
            const work_request& wr = chain[i];
            s[i].wr_id = wr_id;
            s[i].sg_list = const_cast<ibv_sge*>(wr.buffers.data());
            s[i].num_sge = static_cast<int>(wr.buffers.size());
            s[i].send_flags = i + 1 == n ? IBV_SEND_SIGNALED : 0;
            if (wr.what != work_request::kind::read && fits_inline(wr.buffers)) s[i].send_flags |= IBV_SEND_INLINE;
            s[i].opcode = wr.what == work_request::kind::send    ? IBV_WR_SEND
                          : wr.what == work_request::kind::write ? IBV_WR_RDMA_WRITE
                                                                 : IBV_WR_RDMA_READ;
            s[i].wr.rdma.remote_addr = wr.remote_address;
            s[i].wr.rdma.rkey = wr.rkey;
            s[i].next = i + 1 == n ? nullptr : &s[i + 1];
        }
        ibv_send_wr* bad = nullptr;
        if (int e = ibv_post_send(qp_, s.data(), &bad)) ec = RDMACM_CALL_ERRNO("ibv_post_send", e);
    }
    end_verbs_call();
    if (!ec) return;
    lock.lock();
    auto failed = outstanding_.take(wr_id);
    if (!failed) return; // closed meanwhile: aborted already
    auto to = executor_.enter();
    // Work queued behind it in error (never posted) may be the oldest now: a pass hands it
    // over in its turn, and nothing else would wake one (the review of 2026-12-05's D3).
    auto wake = outstanding_.has_unposted() ? poller_ : nullptr;
    lock.unlock();
    refuse(to.executor, std::move(*failed), ec);
    if (wake) wake_later(wake);
    settle();
}

void qp_impl::on_destroyed(std::function<void()> release) {
    std::unique_lock lock(mutex_);
    if (!machine_.was_destroyed()) {
        on_destroyed_.push_back(std::move(release));
        return;
    }
    lock.unlock();
    release();
}

void qp_impl::also_tell_when_context_gone(std::weak_ptr<context_user> user) {
    std::lock_guard lock(mutex_);
    also_gone_.push_back(std::move(user));
}

void qp_impl::queue_pair_destroyed() noexcept {
    std::vector<std::function<void()>> releases;
    std::vector<handler> kept;    // their buffers are nobody's now: they go, never called
    std::shared_ptr<poller> wake; // to hand over what the device can no longer complete
    {
        std::lock_guard lock(mutex_);
        machine_.destroyed();
        releases.swap(on_destroyed_);
        kept.swap(kept_);
        // Closed, work outstanding: a pass flushes it now. Usually the flush's grace came
        // first; not when the device refused the error state (no grace: found by the queue
        // pair explorer, a close trusting a call that then failed).
        if (machine_.flushes_outstanding() && !outstanding_.empty()) wake = poller_;
    }
    if (wake) wake_later(wake);
    for (auto& r : releases) r();
}

void qp_impl::cancel(std::uint64_t wr_id) noexcept {
    {
        std::lock_guard lock(mutex_);
        if (!outstanding_.contains(wr_id)) return; // completed (or aborted) already
        cancelled_.push_back(wr_id);
    }
    connection_lost(); // to the error state: the device flushes every work request
}

error_code qp_impl::outcome(std::uint64_t wr_id, error_code ec) {
    if (cancelled_.empty()) return ec; // the usual case: nothing to look up
    auto it = std::find(cancelled_.begin(), cancelled_.end(), wr_id);
    if (it == cancelled_.end()) return ec;
    cancelled_.erase(it);
    // Done before the queue pair went to error (a message received, say): the cancellation
    // came too late, and what was done is reported, not lost.
    return ec ? error_code(boost::asio::error::operation_aborted) : ec;
}

qp_impl::completion qp_impl::completed(handler h, std::uint64_t wr_id, error_code ec, std::size_t bytes) {
    if (machine_.closed()) return {std::move(h), boost::asio::error::operation_aborted, 0};
    return {std::move(h), outcome(wr_id, ec), bytes};
}

void qp_impl::settle() noexcept {
    std::lock_guard lock(mutex_);
    update_busy();
}

bool qp_impl::busy_now() const noexcept {
    return outstanding_.awaited() > 0 || (machine_.closed() && !outstanding_.empty()) || !held_.empty() ||
           waiting_beside_ > 0;
}

void qp_impl::waiting_beside(int change) noexcept {
    std::lock_guard lock(mutex_);
    waiting_beside_ += change;
    update_busy();
}

void qp_impl::update_busy() noexcept {
    if (bool busy = busy_now(); busy != busy_) executor_.set_busy(busy_ = busy);
}

void qp_impl::refuse(const executor_type& ex, handler h, error_code ec) {
    if (!ex) return; // the context has shut down: nothing runs there any more
    boost::asio::post(ex, boost::asio::append(std::move(h), ec, std::size_t{0}));
}

// A pass: every completion until the queue is empty; to sleep, re-armed first, so that what
// came before the re-arm is polled here (the CQ's event was read and counted by a reader).
// Polled under the poll lock (one poller at a time: completions stay in order), their
// handlers taken in one go under the queue pair's lock, handed over after both, by the
// current reader only, on its strand: in order, with no lock of ours held while handlers run.
qp_impl::pass_result qp_impl::poll(poller& by, pass p) {
    auto& res = *resources_;
    // The reader's storage, reused: no allocation per pass (one pass at a time on its strand).
    auto polled = std::move(by.polled);
    auto done = std::move(by.done);
    bound_executor::handover to; // to hand `done` over (its idle work let go of after)
    pass_result result{};
    std::shared_ptr<poller> wake;     // to hand over what this pass held
    std::shared_ptr<poller> left;     // a closed queue pair's, once flushed: leaves out of our locks
    std::shared_ptr<qp_impl> flushed; // and the queue pair itself (let go of on the destroyer thread)
    {
        std::lock_guard poll_lock(res.poll_mutex);
        std::array<ibv_wc, poll_batch> wc;
        const bool armed = p != pass::arm || res.events.arm(res.cq); // (armed already, unread: nothing to do)
        int n;
        while ((n = ibv_poll_cq(res.cq, poll_batch, wc.data())) > 0)
            for (int i = 0; i < n; ++i)
                polled.push_back({wc[i].wr_id, wc[i].byte_len, wc[i].status, (wc[i].opcode & IBV_WC_RECV) != 0});
        std::lock_guard lock(mutex_);
        for (const auto& c : polled) {
            // What keeps a poller polling: the peer's messages, operations somebody waits for,
            // failures — not a standing send's success (a stream's keep-alive probe, made
            // because the connection is idle: counted, a stream polling for longer than its
            // probe interval would never sleep).
            result.found = result.found || c.received || c.status != IBV_WC_SUCCESS || !outstanding_.standing(c.wr_id);
            auto h = outstanding_.take(c.wr_id);
            if (!h) continue; // aborted by close()
            error_code ec;
            if (c.status != IBV_WC_SUCCESS) {
                ec = error_code(c.status, work_completion_category());
                machine_.failed(); // a failed work request puts an RC queue pair in error
            }
            done.push_back(completed(std::move(*h), c.wr_id, ec, c.bytes));
        }
        const error_code flush_error(IBV_WC_WR_FLUSH_ERR, work_completion_category());
        while (auto next = outstanding_.take_oldest_unposted()) // posted in error: their turn
            done.push_back(completed(std::move(next->second), next->first, flush_error, 0));
        if (machine_.flushes_outstanding() && !outstanding_.empty()) { // after what was polled, in posting order
            for (auto& [wr_id, h] : outstanding_.take_all())
                done.push_back(completed(std::move(h), wr_id, flush_error, 0));
        }
        if (machine_.done(!outstanding_.empty())) { // closed, all flushed: nothing to poll for
            left = std::move(poller_);
            flushed = std::move(flushing_);
        }
        result.current = &by == poller_.get();
        result.outstanding = busy_now(); // (a spin for standing receives alone would hold run())
        result.posted = !outstanding_.empty();
        result.unarmed = !armed && result.current;
        // Closed, every pass hands over at once, held ones first: a close() with nothing to
        // flush let go of the reader (and of held_), and these completed before it, so they
        // complete as they did — held, nothing would ever hand them over (one server
        // coroutine in ~25 never ended after shard_pool::stop()).
        if (machine_.holds(moving_, result.current)) {
            // Held while the id moves. A poller the queue pair has left hands over nothing
            // itself: the current one does, in order (woken here).
            held_.insert(held_.end(), std::make_move_iterator(done.begin()), std::make_move_iterator(done.end()));
            if (!moving_ && poller_ && !done.empty()) wake = poller_;
            done.clear();
        } else if (!held_.empty()) { // older than these
            held_.insert(held_.end(), std::make_move_iterator(done.begin()), std::make_move_iterator(done.end()));
            done.swap(held_);
            held_.clear();
        }
        // What this pass hands over (a polling pass mostly finds nothing).
        if (!done.empty()) to = executor_.get_for_handover(busy_ = busy_now(), by.reader->context_state());
    }
    if (wake) wake_later(wake); // (posted out of our locks: the strand runs on the user's executor)
    // Let go of on the destroyer thread, its CQ with it — unless the caller's reference (a
    // pass's) is the last one by then.
    if (flushed) destroy_later([flushed = std::move(flushed)] {});
    if (!done.empty()) hand_over(done, to.executor, !to.call);
    polled.clear();
    done.clear();
    by.polled = std::move(polled);
    by.done = std::move(done);
    return result;
}

// A reader read the CQ's event: a pass on the current poller — here when it is this
// reader's, else posted to its strand (the queue pair moved to another context).
void qp_impl::cq_event(const completion_reader& by) {
    std::shared_ptr<poller> current;
    {
        std::lock_guard lock(mutex_);
        current = poller_;
    }
    if (!current) return; // closed
    if (current->reader.get() == &by)
        wake(current);
    else
        wake_later(current);
}

// What completed first, handed over; then, unless polling, re-armed and polled once more.
// In that order, the next work a handler posts (the reply it sends) goes before the re-arm,
// a system call on some devices (rxe), not after it.
void qp_impl::wake(const std::shared_ptr<poller>& by) {
    try {
        // A pass that found nothing to poll on for (a keep-alive probe's completion, a new
        // poller's first look) puts a poller that is not spinning back to sleep.
        const bool found = poll(*by, pass::only_poll).found;
        if (!polling() || (!found && !by->spinning)) {
            sleep(by);
            return;
        }
    } catch (...) {
        // A handler run inline threw: out of run(), as Asio's own do. Until re-armed (or
        // polling) nothing would wake the queue pair again: a pass posted goes on.
        wake_later(by);
        throw;
    }
    if (by->spinning) return;
    by->spinning = true;
    by->last_found = std::chrono::steady_clock::now();
    spin(by);
}

void qp_impl::sleep(const std::shared_ptr<poller>& by) {
    if (!poll(*by, pass::arm).unarmed || by->rearm_waits) return;
    by->rearm_waits = by->reader->after_a_pause([self = shared_from_this(), by] {
        by->rearm_waits = false;
        self->wake(by);
    });
}

bool qp_impl::wake_later(const std::shared_ptr<poller>& current) {
    return current->run_on_reader([self = shared_from_this(), current] { self->wake(current); });
}

// A slice of polling: until it has taken spin_slice, then the next slice is posted behind
// the context's other handlers — or, once the queue has been idle for poll_for_ or nothing
// can complete, to sleep: re-armed, the next completion wakes the reader. A poller the
// queue pair has left (moved, closed) stops.
void qp_impl::spin(const std::shared_ptr<poller>& by) {
    using clock = std::chrono::steady_clock;
    auto go_on = [&] {
        if (!by->run_on_reader([self = shared_from_this(), by] { self->spin(by); })) by->spinning = false;
    };
    try {
        auto now = clock::now();
        const auto slice_end = now + spin_slice;
        for (;;) {
            auto r = poll(*by, pass::only_poll);
            now = clock::now();
            if (!r.current) break;
            if (r.found) by->last_found = now;
            // (What this pass handed over may have posted more: looked at in the next.) An
            // adaptive poller polls on while anything is posted: a stream's or a pool's
            // receives, posted for the peer's next message, complete with no operation
            // waiting in between reads (it slept there: each message cost a wake-up). A busy
            // one stops once nothing waits, or run() would never return while they are posted.
            const bool may_complete = poll_for_ == busy_polling ? r.outstanding : r.posted;
            if ((!r.found && !may_complete) || now - by->last_found >= poll_for_) {
                sleep(by);
                break;
            }
            if (now >= slice_end) return go_on();
        }
    } catch (...) {
        // A handler run inline threw: out of run(), as Asio's own do; the polling goes on.
        go_on();
        throw;
    }
    by->spinning = false;
}

// On the current poller's strand (or after close): in order. A handler run inline that
// throws leaves run() as Asio's do: at once on a strand, the ones after it then completing
// queued; after this pass on an io_context, whose executor keeps the exception for run()
// and lets the rest run inline. None runs inline while the pass counts a call into the
// queue pair's context (`may_run_inline` false: a handler could destroy that context).
void qp_impl::hand_over(std::vector<completion>& done, const executor_type& ex, bool may_run_inline) {
    if (!ex) return; // the context has shut down
    const auto queue_from = [&](std::size_t i) {
        for (; i < done.size(); ++i) post_to_handler_executor(std::move(done[i].h), ex, done[i].ec, done[i].bytes);
    };
    std::size_t i = 0;
    try {
        for (; may_run_inline && i < done.size(); ++i)
            dispatch_to_handler(std::move(done[i].h), ex, done[i].ec, done[i].bytes);
    } catch (...) {
        queue_from(i + 1);
        throw;
    }
    queue_from(i);
}

void qp_impl::begin_move(std::uint64_t move) {
    std::lock_guard lock(mutex_);
    move_ = move;
    moving_ = true;
}

void qp_impl::after_handed(std::function<void()> then) {
    // The reader's strand runs after any poll in progress, which handed its completions
    // to the old executor before `then` posts there.
    std::shared_ptr<poller> current;
    {
        std::lock_guard lock(mutex_);
        current = poller_;
    }
    if (!current || !current->run_on_reader(then)) then();
}

bool qp_impl::polls_elsewhere(const executor_type& ex) const { // under mutex_
    // (Closed: only while its flush is polled for. No executor: its context has shut down.)
    if ((machine_.closed() && !flushing_) || !poller_ || !ex) return false;
    const auto here = poller_->reader->get_executor();
    return !here || !same_context(here, ex);
}

void qp_impl::end_move(const executor_type& ex, std::uint64_t move) {
    // The new context reads the CQ's channel (the one it was made on) from here: its reader
    // of that channel is found or made out of our lock (its first read is posted). Made
    // there, completions no longer need the old context to run, or to exist. When none can
    // be made (that context shutting down meanwhile: nothing runs there anyway; or out of
    // memory), the current poller goes on, handing over to `ex`.
    std::shared_ptr<poller> there;
    bool elsewhere;
    {
        std::lock_guard lock(mutex_);
        if (move < move_) return; // stale: a later move began
        elsewhere = polls_elsewhere(ex);
    }
    if (elsewhere) try {
            there = std::make_shared<poller>([&] { return completion_reader::of(ex, resources_->events.channel()); });
        } catch (const std::exception&) {}
    std::shared_ptr<poller> old, current;
    std::vector<completion> left_over; // a closed queue pair's
    executor_type now;
    bool held, regrace;
    {
        std::lock_guard lock(mutex_);
        if (move < move_) return; // (likewise, meanwhile: `there` leaves its reader out of our lock)
        // (For a moment both pollers may poll, one at a time, both handing over to `ex`.)
        if (there && polls_elsewhere(ex)) old = std::exchange(poller_, std::move(there));
        now = executor_.set(ex);
        moving_ = false;
        current = poller_;
        // Closed, with no flush to poll for: no poller follows the queue pair, and the one
        // it has may be on a context that never runs again. What it held is handed over
        // from here: nothing newer can come (nothing outstanding, or aborted here too).
        if (machine_.closed() && !flushing_) left_over = take_left_over();
        held = !held_.empty();
        // A flush made (a close, a lost connection), its grace not over: the grace too, on
        // the new context (the old one may stop before it ends). A flush still being made
        // starts its grace here itself (flush()).
        regrace = machine_.grace_running() && old;
    }
    if (regrace) flush_after_grace(ex);
    // Completions held while moving are handed over by the current poller, before any it
    // polls from now (never from here: a poll deciding meanwhile could hand over newer
    // ones first). A new poller has a first pass in any case: the old one may have been
    // polling with the queue unarmed (polling mode), and stops now that it is not current.
    if ((held || old) && current) wake_later(current);
    if (!left_over.empty()) post_left_over(left_over, now);
    // (`old` and an unused `there` leave their readers here, out of our lock.)
}

std::vector<qp_impl::completion> qp_impl::take_left_over() {
    std::vector<completion> left;
    left.swap(held_); // they completed first: as they did
    if (machine_.flushes_outstanding())
        for (auto& [id, h] : outstanding_.take_all())
            left.push_back({std::move(h), boost::asio::error::operation_aborted, 0});
    return left;
}

void qp_impl::post_left_over(std::vector<completion>& left, const executor_type& ex) {
    if (ex) // (else its context has shut down: they go, never called)
        for (auto& c : left) boost::asio::post(ex, boost::asio::append(std::move(c.h), c.ec, c.bytes));
    left.clear();
    settle();
}

void qp_impl::connection_lost() noexcept {
    {
        std::lock_guard lock(mutex_);
        if (!machine_.lost()) return; // told already (a close(), a loss before)
        begin_verbs_call();           // the flush's ibv_modify_qp: the destroy waits for it
    }
    flush();
}

void qp_impl::flush() noexcept {
    // To the error state, as librdmacm's rdma_disconnect does: the device flushes every
    // work request (each completes with IBV_WC_WR_FLUSH_ERR), none waits for the peer.
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    const bool heeded = ibv_modify_qp(qp_, &attr, IBV_QP_STATE) == 0;
    // The grace starts once the device was told, where the queue pair is now: a move that
    // ended meanwhile found no flush made, and started none (end_move). (Told, under the
    // lock, while the call still counts: a shutdown that saw it being told may call too.)
    // Refused, the device may write every posted buffer still: no grace, the handlers wait
    // for their completions, or for the queue pair's destroy (qp_machine::may_let_go).
    bound_executor::entry to; // (a call into the context until the grace's timer is made)
    {
        std::lock_guard lock(mutex_);
        machine_.told(heeded);
        if (machine_.grace_running()) to = executor_.enter();
    }
    end_verbs_call();
    flush_after_grace(to.executor);
}

bound_executor::entry qp_impl::enter_executor() const noexcept {
    std::lock_guard lock(mutex_);
    return executor_.enter();
}

void qp_impl::let_go_once_safe(std::vector<handler>& handlers) noexcept {
    {
        std::lock_guard lock(mutex_);
        if (!machine_.may_let_go()) // the device refused the error state: until the destroy
            for (auto& h : handlers) kept_.push_back(std::move(h));
    }
    handlers.clear(); // (those not kept go here, out of the lock)
}

void qp_impl::flush_after_grace(const executor_type& ex) {
    // After a grace period, a poll that flushes whatever the device did not.
    if (!ex) return; // the context has shut down
    auto timer = std::make_shared<boost::asio::steady_timer>(ex, flush_grace);
    timer->async_wait([weak = weak_from_this(), timer](error_code) {
        auto self = weak.lock();
        if (!self) return;
        std::shared_ptr<poller> current;
        {
            std::lock_guard lock(self->mutex_);
            self->machine_.grace_over();
            current = self->poller_;
        }
        if (current) self->wake_later(current);
    });
}

// The outstanding work requests' buffers are the device's until it has flushed them: the
// queue pair goes to the error state, and each handler completes (operation_aborted) from
// its flush completion, polled as any other, or after the flush grace — never before. What
// is left to hand over is handed over by a pass of the current poller, as every completion
// is: in order, after any pass in progress (an abort posted from here would overtake what a
// pass on the strand polled before). No context (this close() made inside its shutdown,
// before the queue pair's turn): the device is told, then the handlers go, never called.
void qp_impl::close() noexcept {
    std::vector<completion> left_over; // the handlers no pass will hand over
    std::vector<handler> waiting;      // (let_go_now: those the device may still hold)
    std::shared_ptr<poller> current, left;
    qp_machine::closing steps;
    {
        std::lock_guard lock(mutex_);
        if (machine_.closed()) return;
        const bool runs = static_cast<bool>(executor_.get());
        steps = machine_.close({.outstanding = !outstanding_.empty(), .context_runs = runs});
        update_busy(); // (closed: its standing receives are awaited now, until flushed)
        cancelled_.clear();
        if (steps.tell) begin_verbs_call(); // the flush's ibv_modify_qp: the destroy waits for it
        if (steps.wait_for_flush) flushing_ = shared_from_this();
        if (steps.let_go_now) {
            left_over.swap(held_); // (completed: their buffers are back)
            for (auto& [id, h] : outstanding_.take_all()) waiting.push_back(std::move(h));
            left = std::move(poller_);
            update_busy();
        }
        current = poller_;
        closing_.store(true); // no verbs call starts from here (wait_idle)
    }
    if (steps.tell) flush();
    let_go_once_safe(waiting); // (after the device was told: none unless let_go_now)
    if (steps.let_go_now || steps.wait_for_flush || !current || wake_later(current))
        return; // (what was left over goes here)
    // The reader's context is gone (a move that could not seat the queue pair on its new
    // context): nothing polls any more; what a pass would hand over is posted from here.
    bound_executor::entry to;
    {
        std::lock_guard lock(mutex_);
        left_over = take_left_over();
        left = std::move(poller_);
        to = executor_.enter();
    }
    post_left_over(left_over, to.executor);
}

void qp_impl::context_gone() noexcept {
    // Destroyed here, outside the lock: a coroutine frame suspended on the queue pair lets
    // go of it (a cycle otherwise: frame -> queue pair -> handler -> frame).
    std::vector<handler> waiting;
    std::vector<completion> held;
    std::shared_ptr<qp_impl> flushing;
    std::vector<std::shared_ptr<context_user>> users;
    bool tell;
    {
        std::lock_guard lock(mutex_);
        if (executor_.get()) return; // it moved to a live context meanwhile: they run there
        for (auto& u : also_gone_)
            if (auto p = u.lock()) users.push_back(std::move(p));
        // The device told to let go of their buffers before they go (nothing polls for its
        // flush any more), unless it was told or erred by itself (qp_machine).
        tell = machine_.context_gone(!outstanding_.empty());
        if (tell) begin_verbs_call();
        for (auto& [id, h] : outstanding_.take_all()) waiting.push_back(std::move(h));
        held.swap(held_);
        cancelled_.clear();
        flushing = std::move(flushing_);
        update_busy();
    }
    if (tell) flush();
    let_go_once_safe(waiting);
    if (flushing) destroy_later([flushing = std::move(flushing)] {});
    for (auto& u : users) u->context_gone(); // (a receive_pool's own waiting handler)
}

queue_pair_base::queue_pair_base(executor_type ex, const std::shared_ptr<id_impl>& id,
                                 const queue_pair_options& options)
    : io_handle(std::move(ex), qp_impl::create(id, options)) {}

queue_pair_base::native_handle_type queue_pair_base::native_handle() const noexcept {
    return impl_ ? impl_->native() : nullptr;
}

void queue_pair_base::close() noexcept {
    if (auto impl = std::move(impl_)) impl->close();
}

queue_pair_base::executor_type queue_pair_base::current_executor(const std::shared_ptr<qp_impl>& impl,
                                                                 const executor_type& fallback) {
    return impl ? impl->get_executor() : fallback;
}

void queue_pair_base::post(const std::shared_ptr<qp_impl>& qp, const executor_type& fallback, const work_request& wr,
                           const gathered_buffers& found, handler h) {
    if (const error_code refusal = qp ? qp->refusal(wr.what, found) : error_code(errc::not_open)) {
        auto to = qp ? qp->enter_executor() : bound_executor::entry{{}, fallback};
        qp_impl::refuse(to.executor, std::move(h), refusal);
    } else
        qp->post(wr, std::move(h));
}

} // namespace detail

} // namespace rdmacm
