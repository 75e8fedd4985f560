#include "common/context_bound.hpp"

#include "rdmacm/detail/follow_executor.hpp"

#include <boost/asio/detail/reactive_descriptor_service.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/strand.hpp>

#include <utility>

namespace rdmacm::detail {
namespace {

// Lives in each execution context that has bound objects: tells them when it shuts down.
class context_service : public boost::asio::execution_context::service {
public:
    static inline boost::asio::execution_context::id id;
    using key_type = context_service;

    explicit context_service(boost::asio::execution_context& ctx)
        : service(ctx), state_(std::make_shared<context_bound::state>()) {
        // Made after the descriptor service (and its reactor), so shut down before them:
        // bound descriptors are released while the reactor still works.
        boost::asio::use_service<boost::asio::detail::reactive_descriptor_service>(ctx);
    }

    std::shared_ptr<context_bound::state> state() const { return state_; }

private:
    void shutdown() override {
        std::vector<std::shared_ptr<context_user>> users;
        {
            std::unique_lock lock(state_->mutex);
            // Calls into the context end first: they use parts the members are about to
            // let go of. (Members stay registered meanwhile: one destroyed now leaves.)
            state_->closing = true;
            state_->calls_done.wait(lock, [&] { return state_->calls == 0; });
            state_->alive = false;
            for (auto* m : state_->members) {
                m->context_shutdown();
                if (auto u = m->user()) users.push_back(std::move(u));
            }
            state_->members.clear();
            state_->work = {};
        }
        // Their handlers go now, while the context still works (a coroutine frame's
        // destruction may post, close ids, ...): no lock of ours is held.
        for (auto& u : users) u->context_gone();
    }

    std::shared_ptr<context_bound::state> state_;
};

} // namespace

std::shared_ptr<context_bound::state> context_bound::state_of(const boost::asio::any_io_executor& ex) {
    return boost::asio::use_service<context_service>(boost::asio::query(ex, boost::asio::execution::context)).state();
}

boost::asio::any_io_executor context_executor(const boost::asio::any_io_executor& ex) {
    using io_executor = boost::asio::io_context::executor_type;
    if (const auto* e = ex.target<io_executor>()) return *e;
    if (const auto* s = ex.target<boost::asio::strand<io_executor>>()) return s->get_inner_executor();
    if (const auto* s = ex.target<boost::asio::strand<follow_executor>>())
        return boost::asio::query(s->get_inner_executor(), boost::asio::execution::context).get_executor();
    if (const auto* s = ex.target<boost::asio::strand<boost::asio::any_io_executor>>())
        return context_executor(s->get_inner_executor());
    return ex;
}

namespace {
// The io_context under an executor of the usual two kinds, an io_context's or a strand of
// one, asked of its type with no copy of the executor (Asio's query through
// any_io_executor costs about twice as much, and runs on every move); null for any other.
boost::asio::io_context* known_context(const boost::asio::any_io_executor& ex) noexcept {
    using io_executor = boost::asio::io_context::executor_type;
    if (const auto* e = ex.target<io_executor>()) return &e->context();
    if (const auto* s = ex.target<boost::asio::strand<io_executor>>()) return &s->get_inner_executor().context();
    return nullptr;
}
} // namespace

bool runs_in_this_thread(const boost::asio::any_io_executor& ex) {
    if (auto* known = known_context(ex)) return known->get_executor().running_in_this_thread();
    const auto context = context_executor(ex);
    const auto* e = context.target<boost::asio::io_context::executor_type>();
    return e && e->running_in_this_thread();
}

bool same_context(const boost::asio::any_io_executor& a, const boost::asio::any_io_executor& b) noexcept {
    if (!a || !b) return false;
    const auto *x = known_context(a), *y = known_context(b);
    if (x && y) return x == y;
    return &boost::asio::query(a, boost::asio::execution::context) ==
           &boost::asio::query(b, boost::asio::execution::context);
}

void context_bound::state::work_started(const boost::asio::any_io_executor& ex) {
    ++busy;
    // The first busy member's executor, unless that one cannot track work (a user's that
    // ignores outstanding_work.tracked): then the next one's. (One member's executor that
    // cannot must not leave the context without the work of the others.)
    if (!work) work = context_work::on(context_executor(ex));
}

context_work context_bound::state::work_finished() noexcept {
    return --busy == 0 ? std::exchange(work, {}) : context_work{};
}

context_work context_work::on(const boost::asio::any_io_executor& ex) {
    context_work w;
    if (const auto* io = ex.target<boost::asio::io_context::executor_type>()) {
        io->on_work_started();
        w.counted_ = &io->context();
        return w;
    }
    using boost::asio::execution::outstanding_work;
    auto tracked = boost::asio::prefer(ex, outstanding_work.tracked);
    if (boost::asio::query(tracked, outstanding_work) == outstanding_work.tracked) w.tracked_ = std::move(tracked);
    return w;
}

context_work::~context_work() {
    if (counted_) counted_->get_executor().on_work_finished();
}

boost::asio::any_io_executor bound_executor::get() const noexcept {
    std::lock_guard lock(state_->mutex);
    return executor_;
}

void bound_executor::set_user(std::weak_ptr<context_user> u) noexcept {
    std::lock_guard lock(state_->mutex);
    user_ = std::move(u);
}

void bound_executor::set_busy(bool busy) noexcept {
    std::lock_guard lock(state_->mutex);
    // (Letting go of work calls the executor's work counting, no handler: at most the
    // context stops.)
    (void)switch_work(busy);
}

bound_executor::handover bound_executor::get_for_handover(bool busy, const state* here) noexcept {
    std::lock_guard lock(state_->mutex);
    auto idle = switch_work(busy);
    if (!executor_) return {{}, {}, std::move(idle)};
    // Its shutdown has begun, and waits for the calls in progress (it is still alive, or
    // executor_ would be empty): no executor, but a call all the same — the handlers taken
    // go, and the idle work with them, before the context may be freed (the review of
    // 2026-12-05's D2).
    if (state_->closing) return {call_in_progress(*state_), {}, std::move(idle)};
    if (state_.get() == here || runs_in_this_thread(executor_)) // (built in place: no assignments)
        return {{}, executor_, std::move(idle)};
    return {call_in_progress(*state_), executor_, std::move(idle)};
}

bound_executor::entry bound_executor::enter() const noexcept {
    std::lock_guard lock(state_->mutex);
    return enter_locked();
}

bound_executor::entry bound_executor::enter(const boost::asio::any_io_executor& other,
                                            bool& on_its_context) const noexcept {
    std::lock_guard lock(state_->mutex);
    on_its_context = same_context(executor_, other);
    return enter_locked();
}

bound_executor::entry bound_executor::enter_locked() const noexcept {
    if (!executor_) return {};
    if (state_->closing) return {call_in_progress(*state_), {}};
    if (runs_in_this_thread(executor_)) return {{}, executor_}; // (its shutdown cannot begin meanwhile)
    return {call_in_progress(*state_), executor_};
}

void bound_executor::recheck(entry& e) const noexcept {
    if (!e.call) return; // none, or this thread runs the context: it cannot have begun to shut down
    std::lock_guard lock(state_->mutex);
    if (state_->closing) e.executor = {};
}

context_work bound_executor::switch_work(bool busy) noexcept {
    if (busy == busy_) return {};
    busy_ = busy;
    if (!state_->alive || !is_member()) return {}; // counted when bound again
    if (!busy) return state_->work_finished();
    state_->work_started(executor_);
    return {};
}

boost::asio::any_io_executor bound_executor::set(const boost::asio::any_io_executor& ex) {
    {
        // Within one context (two channels of one io_context, a strand of it): no
        // registration or work changes.
        std::lock_guard lock(state_->mutex);
        if (state_->alive && executor_ == ex) return executor_; // (a move between two channels of one executor)
        if (state_->alive && same_context(executor_, ex)) {
            executor_ = ex;
            return executor_;
        }
    }
    unbind();
    return bind(ex);
}

boost::asio::any_io_executor bound_executor::bind(const boost::asio::any_io_executor& ex) {
    state_ = state_of(ex);
    std::lock_guard lock(state_->mutex);
    if (!state_->alive) return {}; // nothing runs there any more
    executor_ = ex;
    if (busy_) state_->work_started(ex);
    state_->add(this);
    return executor_;
}

void bound_executor::unbind() noexcept {
    std::lock_guard lock(state_->mutex);
    if (!state_->alive) return; // its shutdown took the executor already
    // (Once: a set() whose bind() threw leaves this bound to a state it left.)
    if (state_->remove(this) && busy_) (void)state_->work_finished(); // (under the mutex: at most the context stops)
    executor_ = {};
}

} // namespace rdmacm::detail
