#pragma once
// The shard pool's core, compiled once: shards (io_context + thread + event channel), the
// registry of pooled connections, placement, moves, rebalancing and stop. Every method may
// be called from any thread; one mutex guards the registry and the shards' channels.
#include "rdmacm/pooled_connection.hpp"
#include "rdmacm/connection_request.hpp"
#include "common/context_bound.hpp"
#include "rdmacm/detail/shard_pool_base.hpp"
#include "rdmacm/event_channel.hpp"
#include "rdmacm/listener.hpp"
#include "rdmacm/placement.hpp"
#include "rdmacm/pool_stop_mode.hpp"
#include "rdmacm/rebalance.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/prefer.hpp>

#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

namespace rdmacm {}

namespace rdmacm::detail {

class channel_impl;
class id_impl;
struct serve_loop;

// How a move's handler runs once it moved: posted (a user's), or called inside the
// connection's strand on its new shard (the rebalance's count of its moves, which posts
// the user's handler itself: a post per moved connection less).
enum class moved_handler : std::uint8_t { posted, called };

// A move ordered while the connection is placed or moved: made once that ends.
struct queued_move {
    std::size_t to;
    shard_pool_base::void_handler handler;
    moved_handler how;
};

// What the pool knows of a connection; shared with the connection object.
struct pooled_state {
    std::uint64_t key = 0;
    std::shared_ptr<std::atomic<boost::asio::io_context*>> home; // where its strand runs
    // The connection's executor, let go of when its shard shuts down (a continuation
    // holding this state may outlive that shard in another one's queue). Under the pool's mutex.
    std::optional<bound_executor> strand;
    std::weak_ptr<id_impl> id;
    std::weak_ptr<pool_impl> pool;
    std::atomic<std::size_t> shard{0};
    std::atomic<double> load{0};
    bool moving = false; // under the pool's mutex
    // One move waits behind the one under way (or the placement), under the pool's mutex:
    // a user who moves a connection as soon as it is known (snapshot(), a rebalance) need
    // not know whether its placement has ended. A second one is refused.
    std::optional<queued_move> queued;
    // A placement's handler until its move ends, or until stop() completes it (under the
    // pool's mutex): the move's next step may wait on the request's context, which a stop
    // must not wait for (it may be the thread calling stop()) — fresh review F1.
    shard_pool_base::place_handler placing;
};

class pool_impl : public std::enable_shared_from_this<pool_impl> {
public:
    using executor_type = boost::asio::any_io_executor;
    using void_handler = shard_pool_base::void_handler;
    using place_handler = shard_pool_base::place_handler;
    using rebalance_handler = shard_pool_base::rebalance_handler;
    using serve_function = shard_pool_base::serve_function;
    using exception_handler = shard_pool_base::exception_handler;

    static std::shared_ptr<pool_impl> create(std::size_t shards, placement_policy placement,
                                             exception_handler on_exception);
    ~pool_impl();

    std::size_t size() const noexcept { return shards_.size(); }
    executor_type get_executor(std::size_t shard) const;
    boost::asio::io_context& context(std::size_t shard);
    std::vector<std::size_t> connection_counts() const;
    std::vector<connection_load> snapshot() const;
    std::optional<std::size_t> running_shard() const noexcept;
    std::shared_ptr<pooled_state> find(std::uint64_t key) const;

    void place(connection_request request, place_handler handler);
    // Serves the requests of the listening id `source` (null: the listener was moved from),
    // whose executor is `ex`.
    void serve(const std::shared_ptr<id_impl>& source, const executor_type& ex, serve_function serve,
               void_handler handler);
    // `handler` is posted once the connection's strand runs on the new shard: nothing of it
    // runs inside the strand.
    void move(const std::shared_ptr<pooled_state>& state, std::size_t to, void_handler handler);
    void rebalance(const rebalance_plan& plan, rebalance_handler handler);
    void stop(pool_stop_mode mode);

    void remove(pooled_state& state) noexcept;

private:
    struct shard {
        boost::asio::io_context context{1};
        std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard;
        std::optional<event_channel> channel; // under mutex_; released at stop
        std::thread thread;
        std::size_t connections = 0; // under mutex_
    };
    pool_impl(placement_policy placement, exception_handler on_exception)
        : placement_(std::move(placement)), on_exception_(std::move(on_exception)) {}
    void run(std::size_t index) noexcept;
    // An exception escaped user code on a shard's thread (or, from a coroutine's end, on
    // whichever thread ran it): to the user's handler, else stderr.
    void report(std::optional<std::size_t> index, const std::exception_ptr& e) const noexcept;
    bool on_pool_thread() const noexcept;
    // Under mutex_: where a refusal or an operation's end goes, holding that shard running
    // until then (shard i's executor, its work tracked; the system executor once stopping).
    executor_type holding_executor(std::size_t i) const;
    void accept_next(std::shared_ptr<serve_loop> loop);
    // A move checked and the connection marked moving (under mutex_): the migration to make.
    // None when refused (the refusal is on its way to the handler) or queued behind the
    // move under way.
    struct ordered_move {
        std::shared_ptr<id_impl> id;
        void_handler handler; // the migrate handler
        std::shared_ptr<channel_impl> target;
        executor_type target_ex;
        void start(); // the migration (no lock held)
    };
    std::optional<ordered_move> order_move(const std::shared_ptr<pooled_state>& state, std::size_t to,
                                           void_handler handler, moved_handler how);
    std::optional<ordered_move> order_move_locked(const std::shared_ptr<pooled_state>& state, std::size_t to,
                                                  void_handler handler, moved_handler how);
    // Under mutex_: the connection's placement or move has ended; the move waiting behind
    // it is ordered into `next` (empty), to start once the lock is let go of — before the
    // ended one's handler runs, which could throw past it.
    void ended_move(const std::shared_ptr<pooled_state>& state, std::optional<ordered_move>& next);
    // Under mutex_: the connection leaves the registry (remove(), a failed placement).
    void forget(pooled_state& state) noexcept;
    // The migrate handler of a move: on success, the connection's strand follows to shard
    // `to` (on_strand_at), and `handler` completes there (how says how). `fallback` (shard
    // `to`'s) and `old_shard` hold work on the move's two shards until it is done.
    void_handler on_migrated(std::shared_ptr<pooled_state> state, std::size_t to, void_handler handler,
                             executor_type fallback, executor_type old_shard, moved_handler how);
    void join();
    // An unopened connection on `ex`, which holds no work there (a refusal's executor may).
    static pooled_connection failed_connection(const executor_type& ex) {
        const executor_type on = boost::asio::prefer(ex, boost::asio::execution::outstanding_work.untracked);
        return {access::make<cm_id>(empty_id{}, on), {}, nullptr, on};
    }

    mutable std::mutex mutex_;
    placement_policy placement_;
    const exception_handler on_exception_;
    std::deque<shard> shards_;
    std::vector<std::thread::id> thread_ids_; // set at creation, read from any thread
    std::unordered_map<std::uint64_t, std::shared_ptr<pooled_state>> connections_;
    std::vector<std::weak_ptr<id_impl>> listeners_;
    std::uint64_t next_key_ = 1;
    std::atomic<bool> stopping_ = false; // set once, never cleared
    std::once_flag joined_;
};

} // namespace rdmacm::detail
