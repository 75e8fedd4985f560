// The shard pool: placing a request is a migration of its id to the chosen shard's channel;
// moving a connection is a migration plus a retarget of its strand (follow_executor), done
// when the migration has completed, so its handlers are on the new shard from then on (the
// strand keeps them in order across the switch). Counts per shard change under the pool's
// mutex with the registry.
#include "pool/pool_impl.hpp"

#include "rdmacm/detail/follow_executor.hpp"
#include "cm/id_impl.hpp"
#include "rdmacm/listener.hpp"

#include "common/dispatch_to_handler.hpp"
#include "pool/pool_machine.hpp"

#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/system_executor.hpp>

#include <cstdio>
#include <map>
#include <exception>

namespace rdmacm::detail {
namespace {

// A pooled connection's strand: its handlers in order, on whichever shard it is homed.
using connection_strand = boost::asio::strand<follow_executor>;

// From an initiating function: `handler(args...)` by way of a post to `fallback` (never
// inside the call), then on the handler's own executor (dispatch_to_handler). Callers that
// chose a shard as `fallback` hold the pool's mutex, so it cannot stop before the post has
// made work there. `keep` holds the pool, and with it the shard on which its initiation tracks work
// for a handler without an executor of its own, until the handler is done: after stop
// `fallback` is the system executor, whose thread releases that work after the handler
// ran, when the user may have destroyed the pool.
template <typename Handler, typename... Args>
void post_to_handler(std::shared_ptr<const pool_impl> keep, const pool_impl::executor_type& fallback, Handler handler,
                     Args&&... args) {
    auto alloc = boost::asio::get_associated_allocator(handler);
    boost::asio::post(
        fallback, boost::asio::bind_allocator(alloc, [keep = std::move(keep), fallback, handler = std::move(handler),
                                                      ... args = std::forward<Args>(args)]() mutable {
            dispatch_to_handler(std::move(handler), fallback, std::move(args)...);
        }));
}

} // namespace

std::shared_ptr<pool_impl> pool_impl::create(std::size_t n, placement_policy placement,
                                             exception_handler on_exception) {
    if (n == 0) throw boost::system::system_error(make_error_code(errc::no_such_shard), "shard_pool: 0 shards");
    std::shared_ptr<pool_impl> self(
        new pool_impl(placement ? std::move(placement) : round_robin(), std::move(on_exception)));
    for (std::size_t i = 0; i < n; ++i) {
        auto& s = self->shards_.emplace_back();
        s.guard.emplace(s.context.get_executor());
        s.channel.emplace(s.context); // may throw: before any thread starts
    }
    for (std::size_t i = 0; i < n; ++i) {
        auto& s = self->shards_[i];
        s.thread = std::thread([raw = self.get(), i] { raw->run(i); });
        self->thread_ids_.push_back(s.thread.get_id());
    }
    return self;
}

pool_impl::~pool_impl() {
    for (auto& s : shards_)
        if (s.thread.joinable()) {
            s.guard.reset();
            s.channel.reset();
            s.thread.join();
        }
}

void pool_impl::run(std::size_t index) noexcept {
    for (;;) {
        try {
            shards_[index].context.run();
            return;
        } catch (...) {
            // A handler threw: that handler is done, the shard keeps serving the others.
            report(index, std::current_exception());
        }
    }
}

void pool_impl::report(std::optional<std::size_t> index, const std::exception_ptr& e) const noexcept {
    std::size_t at = index.value_or(shards_.size());
    if (on_exception_) {
        on_exception_(at, e);
        return;
    }
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& x) {
        std::fprintf(stderr, "rdmacm::shard_pool: shard %zu: a handler threw: %s\n", at, x.what());
    } catch (...) {
        std::fprintf(stderr, "rdmacm::shard_pool: shard %zu: a handler threw a non-std exception\n", at);
    }
}

// Once stopped, the shards' contexts no longer run: refusals go to the handler's own
// executor, or for a handler without one to the system executor. Before, shard `i`'s
// executor with work tracked: taken under the mutex, while stop() has not let go of the
// shard, it keeps the shard running until whatever holds it has run — no continuation of
// an operation lands on a shard that stopped under it (review F3).
pool_impl::executor_type pool_impl::holding_executor(std::size_t i) const {
    if (stopping_) return boost::asio::system_executor();
    return boost::asio::prefer(get_executor(i), boost::asio::execution::outstanding_work.tracked);
}

std::optional<std::size_t> pool_impl::running_shard() const noexcept {
    auto it = std::find(thread_ids_.begin(), thread_ids_.end(), std::this_thread::get_id());
    if (it == thread_ids_.end()) return std::nullopt;
    return static_cast<std::size_t>(it - thread_ids_.begin());
}

bool pool_impl::on_pool_thread() const noexcept { return running_shard().has_value(); }

pool_impl::executor_type pool_impl::get_executor(std::size_t i) const {
    return const_cast<boost::asio::io_context&>(shards_.at(i).context).get_executor();
}

boost::asio::io_context& pool_impl::context(std::size_t i) { return shards_.at(i).context; }

std::vector<std::size_t> pool_impl::connection_counts() const {
    std::lock_guard lock(mutex_);
    std::vector<std::size_t> counts;
    for (const auto& s : shards_) counts.push_back(s.connections);
    return counts;
}

std::vector<connection_load> pool_impl::snapshot() const {
    std::lock_guard lock(mutex_);
    std::vector<connection_load> all;
    all.reserve(connections_.size());
    for (const auto& [key, s] : connections_) all.push_back({key, s->shard.load(), s->load.load()});
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.key < b.key; }); // oldest first
    return all;
}

std::shared_ptr<pooled_state> pool_impl::find(std::uint64_t key) const {
    std::lock_guard lock(mutex_);
    auto it = connections_.find(key);
    return it == connections_.end() ? nullptr : it->second;
}

void pool_impl::remove(pooled_state& state) noexcept {
    std::lock_guard lock(mutex_);
    forget(state);
}

void pool_impl::forget(pooled_state& state) noexcept {
    if (connections_.erase(state.key) != 0) --shards_[state.shard].connections;
}

void pool_impl::place(connection_request request, place_handler handler) {
    auto id = access::impl(request.id);
    error_code ec = request.id.is_open() ? error_code() : errc::not_open;
    std::size_t to = 0;
    if (!ec && !stopping_) {
        // The policy runs with no lock held: it is the user's code, and may call into the
        // pool. Counts it decides on may be stale by the time the connection is counted.
        to = placement_(connection_counts(), request);
        if (to >= shards_.size()) ec = errc::no_such_shard;
    }
    std::unique_lock lock(mutex_);
    if (stopping_) ec = errc::pool_stopped; // (maybe while the policy ran)
    if (ec) {
        auto ex = holding_executor(0);
        post_to_handler(shared_from_this(), ex, std::move(handler), ec, failed_connection(ex));
        return; // the request's id goes with it: rejected
    }
    auto state = std::make_shared<pooled_state>();
    state->key = next_key_++;
    state->home = std::make_shared<follow_executor::home>(&shards_[to].context);
    state->id = id;
    state->pool = weak_from_this();
    state->shard = to;
    state->moving = true;
    state->placing = std::move(handler);
    connections_.emplace(state->key, state);
    ++shards_[to].connections;
    auto target = access::impl(*shards_[to].channel);
    executor_type ex = shards_[to].context.get_executor();
    lock.unlock();

    // The continuation holds the pool weakly: it may sit in a shard's queue after stop()
    // joined that shard, and the pool owns the shard (a cycle, never freed).
    id->migrate(target, ex,
                [weak = weak_from_this(), state, request = std::move(request), ex](error_code migrated) mutable {
                    auto self = weak.lock();
                    if (!self) return; // the pool is gone: nothing runs where the handler would
                    place_handler taken;
                    std::optional<ordered_move> next; // a move ordered meanwhile
                    executor_type strand;             // (made only for a connection that moved)
                    if (!migrated) strand = connection_strand(follow_executor(state->home));
                    {
                        std::lock_guard relock(self->mutex_);
                        taken = std::exchange(state->placing, nullptr);
                        if (!migrated && taken) state->strand.emplace(strand);
                        if (migrated) self->forget(*state); // (a move ordered meanwhile: not_open)
                        self->ended_move(state, next);
                    }
                    if (next) next->start(); // (before the handler: it may throw)
                    if (!taken) return;      // stop() completed it; the request's id goes with `request`
                    if (migrated) {
                        dispatch_to_handler(std::move(taken), ex, migrated, failed_connection(ex));
                        return;
                    }
                    pooled_connection c(std::move(request.id), request.event, state, std::move(strand));
                    dispatch_to_handler(std::move(taken), ex, migrated, std::move(c));
                });
}

// Runs `then` on a connection's strand once the strand runs on `home`: after every handler
// queued on it before — an invoker posted to the old shard before the home changed runs
// them there, and so a move ends only after them (internals.md, finding 15). One hop more at most: the strand's
// next invoker goes to the new home.
// Work is kept on `home` meanwhile (the strand's invoker may be queued on another shard):
// a draining stop cannot let the new shard run out of work first.
// (The strand's own type, not the any_io_executor holding it: a post through that copies
// the strand into new type-erased executors, on the heap, about 1,000 instructions a move.)
template <typename F>
void on_strand_at(const connection_strand& strand, boost::asio::io_context& home, F then) {
    boost::asio::post(strand,
                      [strand, &home, work = boost::asio::make_work_guard(home), then = std::move(then)]() mutable {
                          if (home.get_executor().running_in_this_thread())
                              then();
                          else
                              on_strand_at(strand, home, std::move(then));
                      });
}

// One listener served: accept, place, spawn; again until accepting fails.
struct serve_loop {
    std::shared_ptr<pool_impl> pool;
    // Not owned: the listening id's pending wait holds this loop, and closing the id ends it.
    std::weak_ptr<id_impl> source;
    pool_impl::executor_type source_ex; // the listener may be gone when accepting fails
    // Shared with every coroutine it started: a lambda coroutine's captures live in the
    // function object, which must outlive the coroutine.
    std::shared_ptr<const pool_impl::serve_function> serve;
    pool_impl::void_handler done;
};

void pool_impl::serve(const std::shared_ptr<id_impl>& source, const executor_type& ex, serve_function serve,
                      void_handler handler) {
    bool stopping;
    {
        std::lock_guard lock(mutex_);
        stopping = stopping_;
        if (!stopping && source) listeners_.push_back(source);
    }
    if (stopping || !source) {
        post_to_handler(shared_from_this(), ex, std::move(handler),
                        error_code(stopping ? errc::pool_stopped : errc::not_open));
        return;
    }
    accept_next(std::make_shared<serve_loop>(serve_loop{
        shared_from_this(), source, ex, std::make_shared<const serve_function>(std::move(serve)), std::move(handler)}));
}

void pool_impl::accept_next(std::shared_ptr<serve_loop> loop) {
    auto source = loop->source.lock();
    if (!source) { // closed and destroyed since its last request: as a start on a closed id
        dispatch_to_handler(std::move(loop->done), loop->source_ex, error_code(errc::not_open));
        return;
    }
    auto next = [loop = std::move(loop)](error_code ec, connection_request request) mutable {
        if (ec) {
            dispatch_to_handler(std::move(loop->done), loop->source_ex, ec);
            return;
        }
        loop->pool->place(std::move(request), [serve = loop->serve, pool = std::weak_ptr(loop->pool)](
                                                  error_code placed, pooled_connection c) mutable {
            if (placed) return; // rejected
            auto ex = c.get_executor();
            // The callable form: co_spawn keeps it (and with it `serve`) in the coroutine.
            boost::asio::co_spawn(
                ex, [serve = std::move(serve), c = std::move(c)]() mutable { return (*serve)(std::move(c)); },
                [pool](const std::exception_ptr& e) {
                    if (auto p = e ? pool.lock() : nullptr) p->report(p->running_shard(), e);
                });
        });
        auto pool = loop->pool;
        pool->accept_next(std::move(loop));
    };
    source->start(op_kind::request, id_impl::request_handler(std::move(next)), op_call{});
}

void pool_impl::move(const std::shared_ptr<pooled_state>& state, std::size_t to, void_handler handler) {
    if (auto m = order_move(state, to, std::move(handler), moved_handler::posted)) m->start();
}

void pool_impl::ordered_move::start() { id->migrate(target, target_ex, std::move(handler)); }

void pool_impl::ended_move(const std::shared_ptr<pooled_state>& state, std::optional<ordered_move>& next) {
    state->moving = false;
    if (!state->queued) return;
    auto waiting = std::move(*state->queued);
    state->queued.reset();
    // Ordered in the same hold of the lock: no move ordered meanwhile overtakes it.
    if (auto m = order_move_locked(state, waiting.to, std::move(waiting.handler), waiting.how))
        next.emplace(std::move(*m));
}

std::optional<pool_impl::ordered_move> pool_impl::order_move(const std::shared_ptr<pooled_state>& state, std::size_t to,
                                                             void_handler handler, moved_handler how) {
    std::lock_guard lock(mutex_);
    return order_move_locked(state, to, std::move(handler), how);
}

std::optional<pool_impl::ordered_move> pool_impl::order_move_locked(const std::shared_ptr<pooled_state>& state,
                                                                    std::size_t to, void_handler handler,
                                                                    moved_handler how) {
    // What pool_move_course says at `ordered`, in this hold of the pool's lock: refused once
    // stopping; else both shards held, from here until the handler is done (`fallback` on the
    // new one), so each step the move posts, to either, finds it running, and stop() waits
    // for it (review F3: a failed move's count posted to a shard stop() had let go of).
    static_assert(pool_move_course(pool_move_place::ordered, {}).list[0] == pool_move_action::hold_shards &&
                      pool_move_course(pool_move_place::ordered, {}).list[1] == pool_move_action::migrate &&
                      pool_move_course(pool_move_place::ordered, {.stopping = true}).list[0] ==
                          pool_move_action::refuse,
                  "the move below reads the holds taken before it");
    executor_type fallback, old_shard;
    for (auto action : pool_move_course(pool_move_place::ordered, {.stopping = stopping_})) {
        switch (action) {
        case pool_move_action::refuse: // (holding_executor: the system executor, once stopping)
            post_to_handler(shared_from_this(), holding_executor(0), std::move(handler),
                            error_code(errc::pool_stopped));
            return std::nullopt;
        case pool_move_action::hold_shards:
            fallback = holding_executor(to < shards_.size() ? to : 0);
            old_shard = holding_executor(state ? state->shard.load() : 0);
            break;
        case pool_move_action::migrate: {
            auto id = state ? state->id.lock() : nullptr;
            error_code ec;
            if (!id || !connections_.contains(state->key))
                ec = errc::not_open;
            else if (to >= shards_.size())
                ec = errc::no_such_shard;
            else if (state->moving && !state->queued) { // made when the one under way ends
                state->queued.emplace(queued_move{to, std::move(handler), how});
                return std::nullopt;
            } else if (state->moving)
                ec = errc::operation_in_progress;
            if (ec || state->shard == to) {
                post_to_handler(shared_from_this(), fallback, std::move(handler), ec);
                return std::nullopt;
            }
            state->moving = true;
            auto target = access::impl(*shards_[to].channel);
            executor_type target_ex = shards_[to].context.get_executor();
            return ordered_move{std::move(id),
                                on_migrated(state, to, std::move(handler), fallback, std::move(old_shard), how),
                                std::move(target), std::move(target_ex)};
        }
        default: break; // (none other at `ordered`)
        }
    }
    return std::nullopt;
}

pool_impl::void_handler pool_impl::on_migrated(std::shared_ptr<pooled_state> state, std::size_t to,
                                               void_handler handler, executor_type fallback, executor_type old_shard,
                                               moved_handler how) {
    return void_handler([weak = weak_from_this(), state = std::move(state), to, handler = std::move(handler),
                         fallback = std::move(fallback), old_shard = std::move(old_shard),
                         how](error_code migrated) mutable {
        auto self = weak.lock(); // weakly, as in place()
        if (!self) return;
        if (migrated) { // pool_move_course at `failed`
            std::optional<ordered_move> next;
            {
                std::lock_guard relock(self->mutex_);
                self->ended_move(state, next);
            }
            if (next) next->start();
            dispatch_to_handler(std::move(handler), fallback, migrated);
            old_shard = executor_type();
            return;
        }
        static_assert(pool_move_course(pool_move_place::failed, {}).size == 3 &&
                      pool_move_course(pool_move_place::failed, {}).list[2] == pool_move_action::release_old &&
                      pool_move_course(pool_move_place::migrated, {}).list[0] == pool_move_action::follow_strand &&
                      pool_move_course(pool_move_place::migrated, {}).list[1] == pool_move_action::release_old);
        auto& home = self->shards_[to].context;
        executor_type strand;
        {
            std::lock_guard relock(self->mutex_);
            strand = state->strand ? state->strand->get() : executor_type();
        }
        state->home->store(&home);
        auto moved = [weak, state, to, handler = std::move(handler), fallback, how]() mutable {
            auto pool = weak.lock();
            if (!pool) return;
            std::optional<ordered_move> next;
            {
                std::lock_guard relock(pool->mutex_);
                if (pool->connections_.contains(state->key)) {
                    --pool->shards_[state->shard].connections;
                    ++pool->shards_[to].connections;
                }
                state->shard = to;
                pool->ended_move(state, next);
            }
            if (next) next->start();
            if (how == moved_handler::called)
                std::move(handler)(error_code());
            else // not inside the connection's strand: the user's handler holds up nothing
                post_to_handler_executor(std::move(handler), fallback, error_code());
        };
        if (const auto* s = strand.target<connection_strand>()) // (the only kind a pooled connection has)
            on_strand_at(*s, home, std::move(moved));
        else
            moved();                 // its shard has shut down: nothing runs on the strand any more
        old_shard = executor_type(); // once the hop is posted (a hop queued there is its own work)
    });
}

// One rebalance: its moves run at once; the last to complete reports.
struct rebalance_op {
    rebalance_op(rebalance_report r, std::size_t n, pool_impl::rebalance_handler h)
        : report(std::move(r)), remaining(n), handler(std::move(h)) {}
    std::mutex mutex;
    rebalance_report report;
    std::size_t remaining;
    pool_impl::rebalance_handler handler;
};

void pool_impl::rebalance(const rebalance_plan& plan, rebalance_handler handler) {
    executor_type fallback; // where the report goes: its work held until then (pool_rebalance_start)
    {
        std::lock_guard lock(mutex_);
        fallback = holding_executor(0);
    }
    static_assert(pool_rebalance_start({}).list[0] == pool_move_action::hold_shards);
    rebalance_report report;
    report.before = connection_counts();
    auto moves = stopping_ ? std::vector<planned_move>{} : plan(snapshot(), shards_.size());
    error_code ec;
    if (stopping_)
        ec = errc::pool_stopped;
    else if (std::any_of(moves.begin(), moves.end(),
                         [&](const auto& m) { return m.to >= shards_.size() || m.from >= shards_.size(); }))
        ec = errc::no_such_shard;
    if (ec || moves.empty()) {
        report.after = report.before;
        post_to_handler(shared_from_this(), fallback, std::move(handler), ec, std::move(report));
        return;
    }
    auto op = std::make_shared<rebalance_op>(std::move(report), moves.size(), std::move(handler));
    // The moves from one shard to another go together (id_impl::migrate_together).
    struct shard_pair {
        std::shared_ptr<channel_impl> target;
        executor_type target_ex;
        std::vector<id_impl::migrate_order> orders;
    };
    std::map<std::pair<std::size_t, std::size_t>, shard_pair> together;
    for (const auto& m : moves) {
        // (Called in the moved connection's strand; where its move failed; or from a refusal's
        // post.)
        auto count = [self = shared_from_this(), op, m, fallback](error_code moved) {
            {
                std::lock_guard lock(op->mutex);
                if (moved)
                    op->report.failed.emplace_back(m, moved);
                else
                    op->report.moved.push_back(m);
                if (--op->remaining != 0) return;
            }
            // The last move's: no other touches `op` now. The user's handler is posted: never
            // inside a connection's strand, with no lock of ours held.
            op->report.after = self->connection_counts();
            post_to_handler(self, fallback, std::move(op->handler), error_code{}, std::move(op->report));
        };
        if (auto ordered = order_move(find(m.key), m.to, std::move(count), moved_handler::called)) {
            auto& pair = together[{m.from, m.to}];
            pair.target = std::move(ordered->target);
            pair.target_ex = std::move(ordered->target_ex);
            pair.orders.push_back({std::move(ordered->id), std::move(ordered->handler)});
        }
    }
    for (auto& [shards, pair] : together)
        id_impl::migrate_together(std::move(pair.orders), pair.target, pair.target_ex);
}

// stop() takes pool_stop_course's steps in its order.
void pool_impl::stop(pool_stop_mode mode) {
    std::vector<std::shared_ptr<id_impl>> to_close;
    std::vector<place_handler> placing;                      // placements whose move has not ended: pool_stopped
    std::vector<queued_move> queued;                         // moves waiting behind one: pool_stopped
    const executor_type ex = boost::asio::system_executor(); // (stopping: as holding_executor's)
    for (auto step : pool_stop_course) {
        switch (step) {
        case pool_stop_step::refuse_new: {
            std::lock_guard lock(mutex_);
            if (!stopping_)
                for (auto& l : listeners_)
                    if (auto id = l.lock()) to_close.push_back(std::move(id));
            stopping_ = true;
            listeners_.clear();
            for (auto it = connections_.begin(); it != connections_.end();) {
                auto& state = *it->second;
                if (state.queued) queued.push_back(std::move(*state.queued));
                state.queued.reset();
                if (mode == pool_stop_mode::close || state.placing)
                    if (auto id = state.id.lock()) to_close.push_back(std::move(id));
                if (!state.placing) {
                    ++it;
                    continue;
                }
                placing.push_back(std::exchange(state.placing, nullptr));
                --shards_[state.shard].connections;
                it = connections_.erase(it);
            }
            break;
        }
        case pool_stop_step::complete_waiting:
            for (auto& h : placing)
                post_to_handler(shared_from_this(), ex, std::move(h), error_code(errc::pool_stopped),
                                failed_connection(ex));
            for (auto& m : queued)
                post_to_handler(shared_from_this(), ex, std::move(m.handler), error_code(errc::pool_stopped));
            break;
        case pool_stop_step::close_ids:
            for (auto& id : to_close) id->close();
            break;
        case pool_stop_step::release_shards: {
            // The ids keep their channels alive; once the last has gone, the shard runs out of work.
            std::lock_guard lock(mutex_);
            for (auto& s : shards_) {
                s.channel.reset();
                s.guard.reset();
            }
            break;
        }
        case pool_stop_step::join:
            if (!on_pool_thread()) join();
            break;
        }
    }
}

void pool_impl::join() {
    std::call_once(joined_, [this] {
        for (auto& s : shards_)
            if (s.thread.joinable()) s.thread.join();
    });
}

shard_pool_base::shard_pool_base(std::size_t shards, placement_policy placement, exception_handler on_exception)
    : impl_(pool_impl::create(shards, std::move(placement), std::move(on_exception))) {}
std::size_t shard_pool_base::size() const noexcept { return impl_->size(); }
boost::asio::io_context& shard_pool_base::context(std::size_t i) { return impl_->context(i); }
std::vector<std::size_t> shard_pool_base::connection_counts() const { return impl_->connection_counts(); }
std::vector<connection_load> shard_pool_base::snapshot() const { return impl_->snapshot(); }
std::optional<std::size_t> shard_pool_base::running_shard() const noexcept { return impl_->running_shard(); }
void shard_pool_base::stop(stop_mode mode) { impl_->stop(mode); }
shard_pool_base::executor_type shard_pool_base::shard_executor(std::size_t shard) const {
    return impl_->get_executor(shard);
}
void shard_pool_base::place(pool_impl& pool, connection_request request, place_handler h) {
    pool.place(std::move(request), std::move(h));
}
void shard_pool_base::serve(pool_impl& pool, const std::shared_ptr<id_impl>& source, const executor_type& ex,
                            serve_function serve, void_handler h) {
    pool.serve(source, ex, std::move(serve), std::move(h));
}
void shard_pool_base::move(pool_impl& pool, const std::shared_ptr<pooled_state>& connection, std::size_t to,
                           void_handler h) {
    pool.move(connection, to, std::move(h));
}
void shard_pool_base::move(pool_impl& pool, std::uint64_t key, std::size_t to, void_handler h) {
    pool.move(pool.find(key), to, std::move(h));
}
void shard_pool_base::rebalance(pool_impl& pool, const rebalance_plan& plan, rebalance_handler h) {
    pool.rebalance(plan, std::move(h));
}

} // namespace rdmacm::detail
