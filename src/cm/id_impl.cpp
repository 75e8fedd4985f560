#include "cm/id_impl.hpp"

#include "rdmacm/connection_request.hpp"
#include "rdmacm/detail/call_error.hpp"
#include "common/blocking_calls.hpp"
#include "cm/context_channel.hpp"
#include "common/destroyer.hpp"
#include "common/device_release.hpp"
#include "common/dispatch_to_handler.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/system/system_error.hpp>

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <new>
#include <optional>
#include <system_error>

namespace rdmacm::detail {

// Installed in an operation's cancellation slot. Holds no strong reference: a slot may
// outlive the id, and a stale canceller (its operation completed) is a no-op.
struct id_impl::canceller {
    std::weak_ptr<id_impl> impl;
    op_kind kind;
    std::uint32_t generation;
    bool deferred; // not started yet: waiting for a migration to end

    void operator()(boost::asio::cancellation_type type) const {
        // Operations with CM work in the kernel can only be abandoned: terminal. Waiting
        // for an event or a request, or for a migration to end, is cleanly undone: any type.
        bool clean = deferred || kind == op_kind::next_event || kind == op_kind::request;
        if (!clean && (type & boost::asio::cancellation_type::terminal) == boost::asio::cancellation_type::none) return;
        if (auto p = impl.lock()) p->cancel_one(kind, generation, deferred);
    }
};

std::shared_ptr<id_impl> id_impl::create(std::shared_ptr<channel_impl> channel, const executor_type& ex,
                                         rdma_port_space ps) {
    if (!channel) // a closed or moved-from channel
        throw boost::system::system_error(errc::channel_closed, "cm_id: its event channel");
    rdma_cm_id* id = nullptr;
    if (rdma_create_id(channel->native(), &id, nullptr, ps) != 0)
        throw boost::system::system_error(RDMACM_CALL_ERROR("rdma_create_id"));
    return make(std::move(channel), ex, id);
}

std::shared_ptr<id_impl> id_impl::make(std::shared_ptr<channel_impl> channel, const executor_type& ex, rdma_cm_id* id) {
    auto self = std::make_shared<id_impl>(passkey<id_impl>{}, std::move(channel), ex, id);
    self->executor_.set_user(self);
    return self;
}

id_impl::id_impl(passkey<id_impl>, std::shared_ptr<channel_impl> channel, const executor_type& ex, rdma_cm_id* id)
    : channel_(std::move(channel)), executor_(ex), id_(id) {
    // Events carry this pointer: it stays valid until the id is destroyed and the reader
    // has passed the routing barrier, after which no event of the id can be read.
    // Read by the channel's reader when an event comes (ordered by the kernel, which TSan
    // cannot see: hence the atomic).
    std::atomic_ref<void*>(id_->context).store(this, std::memory_order_release);
    channel_->add_owner();
}

id_impl::~id_impl() {
    destroy();
    if (channel_) channel_->remove_owner(); // never closed (its close job never ran)
}

bool id_impl::closed() const noexcept { return closed_.load(std::memory_order_acquire); }

void id_impl::start(op_kind kind, any_handler handler, const op_call& call) {
    std::unique_lock lock(mutex_);
    if (migration_ && !life_.closed()) {
        // Not on a moving id (librdmacm would write to whichever channel it has): it
        // starts on the new channel, in the order it was asked for; until then it can be
        // cancelled like any other.
        const std::uint32_t serial = ++deferred_serial_;
        install_canceller(handler, kind, serial, true);
        migration_->deferred.push_back({kind, std::move(handler), call, serial});
        update_busy();
        return;
    }
    start_now(lock, kind, std::move(handler), call);
}

void id_impl::install_canceller(any_handler& handler, op_kind kind, std::uint32_t generation, bool deferred) {
    std::visit(
        [&](auto& h) {
            if constexpr (!std::is_same_v<std::decay_t<decltype(h)>, std::monostate>) {
                auto slot = boost::asio::get_associated_cancellation_slot(h);
                if (slot.is_connected())
                    slot.template emplace<canceller>(canceller{weak_from_this(), kind, generation, deferred});
            }
        },
        handler);
}

void id_impl::start_now(std::unique_lock<std::mutex>& lock, op_kind kind, any_handler handler, const op_call& call) {
    error_code ec = life_.async_refusal();
    if (!ec) ec = start_in_machine(kind);
    if (ec) {
        lock.unlock();
        complete({std::move(handler), ec, {}, {}});
        return;
    }
    // The peer disconnected first: our rdma_disconnect only answers it (IB's DREP), no
    // DISCONNECTED of our own will come.
    if (kind == op_kind::disconnect && machine_.disconnected()) {
        machine_.completed(kind);
        (void)make_call(lock, call); // the connection is down either way
        after_call(lock);
        complete({std::move(handler), {}, {}, {}});
        return;
    }
    // Already here: an event for next_event, a request for the listener.
    bool queued_event = kind == op_kind::next_event && !events_.empty();
    bool queued_request = kind == op_kind::request && !requests_.empty();
    if (queued_event || queued_request) {
        completion c{std::move(handler), {}, {}, {}};
        if (queued_event) {
            c.event = events_.front();
            events_.pop_front();
        } else {
            c.event = requests_.front().second;
            c.new_id = std::move(requests_.front().first);
            requests_.pop_front();
        }
        machine_.completed(kind);
        lock.unlock();
        complete(std::move(c));
        return;
    }
    const std::uint32_t generation = machine_.generation(kind);
    install_canceller(handler, kind, generation, false);
    handlers_.put(kind, std::move(handler));
    update_busy();
    // The call goes out after the handler is in place: its event cannot beat it.
    if (may_block(kind, call)) {
        // Never on the caller's thread (an io_context's, most likely): a library thread's.
        // A cancellation or a close does not wait for it (the id goes when it returns).
        life_.enter_admitted_call();
        rdma_cm_id* id = id_;
        lock.unlock();
        try {
            run_blocking([self = shared_from_this(), call, id, kind, generation] {
                error_code failed = call(*self, id);
                std::unique_lock relock(self->mutex_);
                self->call_returned(relock, kind, generation, failed);
            });
        } catch (const std::system_error& e) { // no thread to be had: the operation fails, nothing is called
            lock.lock();
            call_returned(lock, kind, generation, error_code(e.code().value(), boost::system::generic_category()));
        } catch (const std::bad_alloc&) { // (the call's function, or its place in the queue)
            lock.lock();
            call_returned(lock, kind, generation, boost::asio::error::no_memory);
        }
        return;
    }
    ec = make_call(lock, call);
    call_returned(lock, kind, generation, ec);
}

error_code id_impl::start_in_machine(op_kind kind) noexcept {
    return machine_.start(kind, !life_.closed() && id_->verbs); // (id_ is valid until closed)
}

bool id_impl::may_block(op_kind kind, const op_call& call) const noexcept {
    // siw holds rdma_disconnect of a connecting id up to its 10 s MPA time-out.
    if (kind == op_kind::disconnect && machine_.pending(op_kind::establish)) return true;
    // An iWARP connect is a kernel TCP connect that blocks (siw_cm.c, kernel_bindconnect:
    // connect() without O_NONBLOCK) — to an address nobody answers, for the SYN retries
    // (about 130 s). IB and RoCE send their request and return.
    return call.what == op_call::call::connect && id_->verbs &&
           id_->verbs->device->transport_type == IBV_TRANSPORT_IWARP;
}

void id_impl::call_returned(std::unique_lock<std::mutex>& lock, op_kind kind, std::uint32_t generation, error_code ec) {
    completion failed;
    // (A changed generation cannot happen: the slot was busy.)
    if (ec && machine_.generation(kind) == generation) {
        machine_.call_failed(kind);
        failed = {handlers_.take(kind), ec, {}, {}}; // none if cancelled meanwhile
    }
    after_call(lock);
    if (failed.handler.index() != 0) complete(std::move(failed));
}

error_code id_impl::make_call(std::unique_lock<std::mutex>& lock, const op_call& call) {
    rdma_cm_id* id = id_;
    life_.enter_admitted_call(); // a migration and a destroy wait for it
    lock.unlock();
    error_code ec = call(*this, id);
    lock.lock();
    return ec;
}

void id_impl::after_call(std::unique_lock<std::mutex>& lock, bool blocking_sync) {
    const auto todo = life_.leave_call(blocking_sync);
    lock.unlock();
    follow(todo);
}

void id_impl::release_if_idle(std::unique_lock<std::mutex>& lock) {
    const auto todo = life_.destroy_if_due();
    lock.unlock();
    follow(todo);
}

void id_impl::follow(id_life::actions todo) {
    for (auto action : todo) {
        switch (action) {
        case id_life::action::move_on: {
            std::unique_lock lock(mutex_);
            migrate_step(lock, how::post); // maybe inside an initiating call: the end is posted
            break;
        }
        case id_life::action::settle_move: end_migration(boost::asio::error::operation_aborted, how::post); break;
        case id_life::action::post_end: break; // (end_migration's, which posts it itself)
        case id_life::action::submit_destroy: submit_destroy(); break;
        }
    }
}

void id_impl::cancel_one(op_kind kind, std::uint32_t generation, bool deferred) noexcept {
    std::unique_lock lock(mutex_);
    if (deferred) {
        if (!migration_) return; // started meanwhile: its own canceller took over
        auto& waiting = migration_->deferred;
        auto it = std::find_if(waiting.begin(), waiting.end(), [&](auto& d) { return d.serial == generation; });
        if (it == waiting.end()) return; // likewise
        completion c{std::move(it->handler), boost::asio::error::operation_aborted, {}, {}};
        waiting.erase(it);
        lock.unlock();
        complete(std::move(c));
        return;
    }
    if (machine_.generation(kind) != generation || !handlers_.holds(kind) || !machine_.cancel(kind)) return;
    completion c{handlers_.take(kind), boost::asio::error::operation_aborted, {}, {}};
    lock.unlock();
    complete(std::move(c));
}

void id_impl::cancel() noexcept {
    std::vector<completion> aborted;
    {
        std::lock_guard lock(mutex_);
        if (migration_) {
            for (auto& d : migration_->deferred)
                aborted.push_back({std::move(d.handler), boost::asio::error::operation_aborted, {}, {}});
            migration_->deferred.clear();
        }
        for (std::size_t k = 0; k < op_kind_count; ++k) {
            const auto kind = static_cast<op_kind>(k);
            if (!handlers_.holds(kind) || !machine_.cancel(kind)) continue;
            aborted.push_back({handlers_.take(kind), boost::asio::error::operation_aborted, {}, {}});
        }
    }
    complete(aborted, how::post);
}

bool id_impl::attach(const std::shared_ptr<data_path>& dp) {
    // Called under a call_guard (qp_impl::create): no move makes its migrate call meanwhile,
    // so none ends; one may begin.
    executor_type ex;
    std::uint64_t move = 0;
    {
        std::unique_lock lock(mutex_);
        data_path_ = dp;
        if (life_.closed()) { // close() came while the queue pair was made: it missed it
            lock.unlock();
            dp->close();
            return false;
        }
        if (migration_) {
            data_path_->begin_move(moves_); // finish_migration ends it
            return true;
        }
        ex = executor_.get(); // where the id is now: a move may have ended since the queue pair was made
        move = moves_;
    }
    // Out of the lock: end_move may post through the id's executor, a user's, whose
    // execute() may close this id (review F6: under the lock, that close deadlocked). A
    // move begun meanwhile makes it a stale end, which the queue pair ignores.
    dp->end_move(ex, move);
    return true;
}

void id_impl::close() noexcept {
    decltype(requests_) unanswered;
    std::shared_ptr<data_path> data;
    id_life::actions todo;
    {
        std::lock_guard lock(mutex_);
        if (life_.closed()) return;
        todo = life_.close();
        connecting_at_close_ = machine_.pending(op_kind::establish); // (closing clears it)
        machine_.close();
        closed_.store(true, std::memory_order_release);
        unanswered.swap(requests_);
        events_.clear();
        data = data_path_;
        // A blocking next_event of synchronous mode ends (operation_aborted).
        if (wake_fd_ >= 0) (void)::eventfd_write(wake_fd_, 1);
    }
    if (data) data->close();
    cancel();
    for (auto& r : unanswered) r.first->close(); // rejected and destroyed
    // A migration whose call is still to be made ends here (settle_move): nothing may wait
    // for a reader or an executor to get round to it (shard_pool::stop() on the very
    // thread that would have made it, then joining). The id goes now if nothing is in
    // flight, else when the last call out, or the migrate call, returns.
    follow(todo);
}

void id_impl::submit_destroy() {
    destroy_later([self = shared_from_this()]() mutable {
        std::shared_ptr<data_path> data;
        {
            std::lock_guard lock(self->mutex_);
            data = self->data_path_;
        }
        if (data) data->wait_idle(); // a post racing close() is still writing to the queue pair
        self->destroy();
        self->destroyed();
        // The data path (completion queue) goes after the queue pair, which went with the id.
        std::shared_ptr<channel_impl> channel;
        ibv_context* removed_device;
        {
            std::lock_guard lock(self->mutex_);
            channel = std::move(self->channel_);
            data = std::move(self->data_path_);
            removed_device = self->removed_device_;
        }
        data.reset();
        // After the data path: its completion queue holds the device until it goes.
        if (removed_device) release_removed_device(removed_device);
        if (!channel) return; // synchronous: librdmacm's private channel went with the id
        // No event of the id is read after rdma_destroy_id, but one read before (and acked:
        // destroy did not wait for it) may still be on its way through the channel's reader,
        // which names the id by a raw pointer: the id's memory goes on the reader's strand,
        // after it — nothing here waits for the reader. Then the channel loses an owner
        // there too (its last reference must go on its own context, or after it is gone).
        auto& reader = *channel;
        reader.run_on_reader_or_here([self = std::move(self), channel = std::move(channel)]() mutable {
            self.reset();
            channel->remove_owner();
        });
    });
}

void id_impl::close_when_destroyed(void_handler h) {
    close();
    std::unique_lock lock(mutex_);
    if (!life_.was_destroyed()) {
        close_waiters_.push_back(std::move(h));
        update_busy(); // (the id keeps the work: it may move before its destroy)
        return;
    }
    lock.unlock();
    complete({std::move(h), {}, {}, {}}, how::post);
}

void id_impl::destroyed() noexcept {
    {
        std::lock_guard lock(mutex_);
        life_.destroyed();
    }
    hand_over_close_waiters();
}

void id_impl::hand_over_close_waiters() noexcept {
    std::vector<void_handler> waiters;
    bound_executor::handover to; // (first: the call into the id's context ends after they went)
    {
        std::lock_guard lock(mutex_);
        if (close_waiters_.empty()) return;
        waiters.swap(close_waiters_);
        // A hand-over from this thread (the destroyer's, or a move's end): a call into the
        // id's context, posted; the work they kept goes once they are.
        to = executor_.get_for_handover(busy_ = busy_now(), nullptr);
        // Neither: that context has shut down, and its context_gone, still to come, lets go
        // of them before the context may be freed (the fourth review's R5); or a move's end
        // binds the id to a live context, and runs them there. Gone already: here.
        if (!to.executor && !to.call && !left_context_) {
            close_waiters_.swap(waiters);
            update_busy();
            return;
        }
    }
    for (auto& h : waiters) complete(to.executor, {std::move(h), {}, {}, {}}, how::post);
}

void id_impl::destroy() noexcept {
    if (wake_fd_ >= 0) ::close(std::exchange(wake_fd_, -1));
    if (!id_) return;
    if (pending_request_) rdma_reject(id_, nullptr, 0);
    bool connecting;
    {
        std::lock_guard lock(mutex_);
        connecting = connecting_at_close_ || machine_.pending(op_kind::establish);
    }
    std::shared_ptr<data_path> data;
    {
        std::lock_guard lock(mutex_);
        data = data_path_;
    }
    if (!connecting) {
        // The usual order: the queue pair (and the CQs librdmacm made for it), memory
        // registered for it, then the id, whose destruction may release librdmacm's
        // protection domain of the device.
        if (id_->qp) rdma_destroy_qp(id_);
        if (data) data->queue_pair_destroyed();
        // Never waits for acks: every event read for this id was acked when it was read.
        rdma_destroy_id(std::exchange(id_, nullptr));
        return;
    }
    // A connect or accept in flight: siw blocks QP destruction (and rdma_disconnect) for its
    // 10 s MPA time-out, while destroying the id returns at once and takes the connection
    // attempt with it. So the id goes first, and we free what rdma_destroy_qp would: the QP
    // and the CQs and channels librdmacm made for it. The device's protection domain, which
    // the QP uses, must outlive it: held by a reference on the device (the id may be its last).
    std::optional<device_reference> device;
    if (id_->qp) device.emplace(id_);
    ibv_qp* qp = std::exchange(id_->qp, nullptr);
    ibv_cq* send_cq = std::exchange(id_->send_cq, nullptr);
    ibv_cq* recv_cq = std::exchange(id_->recv_cq, nullptr);
    ibv_comp_channel* send_channel = std::exchange(id_->send_cq_channel, nullptr);
    ibv_comp_channel* recv_channel = std::exchange(id_->recv_cq_channel, nullptr);
    rdma_destroy_id(std::exchange(id_, nullptr));
    if (qp) ibv_destroy_qp(qp);
    if (data) data->queue_pair_destroyed();
    if (recv_cq) ibv_destroy_cq(recv_cq);
    if (send_cq && send_cq != recv_cq) ibv_destroy_cq(send_cq);
    if (recv_channel) ibv_destroy_comp_channel(recv_channel);
    if (send_channel && send_channel != recv_channel) ibv_destroy_comp_channel(send_channel);
}

void id_impl::on_event(const cm_event& ev) { deliver(ev, true); }

bool id_impl::deliver(const cm_event& ev, bool from_reader, bool post) {
    // At most one completion per event; the rare events that end other operations too
    // (DEVICE_REMOVAL, a connection gone while connecting) fill (and allocate) `failed`.
    // The id's executor as it is when the event is taken (first: its hand-over ends after
    // the handlers below have gone, handed over or not).
    bound_executor::handover to;
    completion done;
    std::vector<completion> failed;
    std::shared_ptr<data_path> broken; // the connection is gone: so is its data path
    {
        std::lock_guard lock(mutex_);
        if (from_reader && migration_) {
            migration_->held.push_back(ev); // delivered on the new executor, in order
            return false;
        }
        if (life_.closed()) return false; // its destruction is under way
        auto d = machine_.on_event(ev.type());
        if (d.connection_lost) broken = data_path_;
        if (ev.type() == RDMA_CM_EVENT_DEVICE_REMOVAL) removed_device_ = id_->verbs;
        switch (d.what) {
        case id_machine::action::complete:
            machine_.completed(d.kind);
            // Filled in place: the event copied once.
            done.handler = handlers_.take(d.kind);
            done.ec = d.result;
            done.event = ev;
            break;
        case id_machine::action::queue: events_.push_back(ev); break;
        case id_machine::action::drop: break;
        }
        for (std::size_t k = 0; d.others != 0 && k < op_kind_count; ++k) {
            auto kind = static_cast<op_kind>(k);
            if (!d.ends(kind)) continue;
            machine_.completed(kind);
            failed.push_back({handlers_.take(kind), d.others_result, ev, {}});
        }
        // The id's work, if it goes idle, is let go of as `to` goes: once these are handed
        // over, even when one run inline throws.
        to = executor_.get_for_handover(busy_ = busy_now(), channel_impl::reading_context());
    }
    if (broken) broken->connection_lost(); // before the event's handler runs
    // The others first, posted: a handler run inline that throws cannot lose them. The
    // event's own follows them, posted too (run inline, it would come first).
    const how mode = post || !failed.empty() ? how::post : inline_unless_counted(to);
    const bool posts = !failed.empty() || (done.handler.index() != 0 && mode == how::post);
    for (auto& c : failed) complete(to.executor, std::move(c), how::post);
    if (done.handler.index() != 0) complete(to.executor, std::move(done), mode);
    return posts;
}

void id_impl::on_request(const std::shared_ptr<channel_impl>& channel, rdma_cm_id* new_id, const cm_event& ev) {
    bound_executor::handover to; // as deliver()'s (first: it ends after `c` went)
    completion c;
    {
        std::lock_guard lock(mutex_);
        // A request is kept only by a listener that is open and whose context runs: one
        // closed, or whose context has shut down (its executor let go of), or beyond its
        // backlog, rejects it — decided before the request's id is wrapped, which needs a
        // living context to be bound to.
        auto ex = life_.closed() ? executor_type{} : executor_.get();
        auto d = ex ? machine_.on_event(ev.type()) : id_machine::decision{};
        bool kept = ex && (d.what == id_machine::action::complete || requests_.size() < backlog_);
        if (!kept) {
            reject_request(channel, new_id);
            return;
        }
        auto conn = make(channel, ex, new_id);
        conn->pending_request_ = true;
        if (d.what != id_machine::action::complete) {
            requests_.emplace_back(std::move(conn), ev);
            return;
        }
        machine_.completed(d.kind);
        c = {handlers_.take(d.kind), {}, ev, std::move(conn)};
        to = executor_.get_for_handover(busy_ = busy_now(), channel_impl::reading_context());
    }
    complete(to.executor, std::move(c), inline_unless_counted(to));
}

void id_impl::reject_request(const std::shared_ptr<channel_impl>& channel, rdma_cm_id* new_id) {
    // Its events name no id from now on (the reader drops them): librdmacm gave it the
    // listener's context, which may be freed before the destroy below is made.
    std::atomic_ref<void*>(new_id->context).store(nullptr, std::memory_order_release);
    // Rejected and destroyed on the destroyer thread, never the reader's; the channel
    // (owned meanwhile) outlives the id, as librdmacm requires.
    channel->add_owner();
    destroy_later([channel = std::shared_ptr(channel), new_id]() mutable {
        rdma_reject(new_id, nullptr, 0);
        rdma_destroy_id(new_id);
        auto& reader = *channel; // (its last reference goes on its own context)
        reader.run_on_reader_or_here([channel = std::move(channel)] { channel->remove_owner(); });
    });
}

void id_impl::refuse(const executor_type& ex, any_handler handler, error_code ec) {
    complete(ex, {std::move(handler), ec, {}, {}}, how::post);
}

void id_impl::complete(completion&& c, how mode) {
    settle_after settle{*this};
    complete(get_executor(), std::move(c), mode);
}

void id_impl::complete(std::vector<completion>& batch, how mode) {
    settle_after settle{*this}; // once every one of them is handed over
    const auto ex = get_executor();
    for (auto& c : batch) complete(ex, std::move(c), mode);
}

id_impl::settle_after::~settle_after() {
    std::lock_guard lock(self.mutex_);
    self.update_busy();
}

bool id_impl::busy_now() const noexcept {
    return (migration_ && (migration_->waited || !migration_->deferred.empty())) || handlers_.any() ||
           !close_waiters_.empty();
}

void id_impl::update_busy() noexcept {
    if (bool busy = busy_now(); busy != busy_) executor_.set_busy(busy_ = busy);
}

void id_impl::context_gone() noexcept {
    // Destroyed here, outside the lock: a coroutine frame suspended on the id lets go of
    // it, and may close it (a cycle otherwise: frame -> id -> handler -> frame).
    std::vector<any_handler> gone;
    std::optional<migration> abandoned; // (its executors are this context's)
    {
        std::lock_guard lock(mutex_);
        if (executor_.get()) return; // it moved to a live context meanwhile: they run there
        left_context_ = true;
        for (std::size_t k = 0; k < op_kind_count; ++k)
            if (auto h = handlers_.take(static_cast<op_kind>(k)); h.index() != 0) gone.push_back(std::move(h));
        for (auto& h : close_waiters_) gone.emplace_back(std::move(h));
        close_waiters_.clear();
        if (migration_) {
            for (auto& d : migration_->deferred) gone.push_back(std::move(d.handler));
            migration_->deferred.clear();
            // A move still to make its call is abandoned: its next step would run here (the
            // last call out, or the old reader, then a post to this context). Its handler
            // goes with the others; the id is no longer moving. (A call being made settles
            // the move: it goes on by posts.)
            if (life_.context_gone()) {
                gone.emplace_back(std::move(migration_->handler));
                take_migration(abandoned);
            }
        }
        update_busy();
    }
    if (abandoned && abandoned->target) abandoned->target->remove_owner(); // taken at its start
}

void id_impl::complete(const executor_type& ex, completion&& c, how mode) {
    if (!ex) return; // the id's context has shut down: nothing runs there any more
    std::visit(
        [&](auto& h) {
            using H = std::decay_t<decltype(h)>;
            auto deliver = [&](auto&&... args) {
                if (mode == how::dispatch) // inline if the reader already runs there
                    dispatch_to_handler(std::move(h), ex, std::forward<decltype(args)>(args)...);
                else
                    boost::asio::post(ex, boost::asio::append(std::move(h), std::forward<decltype(args)>(args)...));
            };
            if constexpr (std::is_same_v<H, void_handler>) {
                deliver(c.ec);
            } else if constexpr (std::is_same_v<H, event_handler>) {
                deliver(c.ec, c.event);
            } else if constexpr (std::is_same_v<H, request_handler>) {
                deliver(c.ec, connection_request{access::make<cm_id>(std::move(c.new_id)), c.event});
            }
        },
        c.handler);
}

} // namespace rdmacm::detail
