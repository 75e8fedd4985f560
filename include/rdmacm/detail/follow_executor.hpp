#pragma once
// An executor whose target io_context can change: a pooled connection's handlers follow the
// connection from shard to shard. Copies share one target (`home`); every submission reads
// it, so work submitted after a move runs on the new shard. Wrapped in a strand
// (pooled_connection::get_executor), which keeps the connection's handlers in order and never two
// at once, even across a move.
//
// Only what a strand and any_io_executor need: execute, the context query, blocking.never
// and .possibly. outstanding_work.tracked is not supported (prefer ignores it): the pool
// keeps its shards' io_contexts running until it stops.
#include <boost/asio/execution.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <memory>
#include <utility>

namespace rdmacm::detail {

class follow_executor {
public:
    using home = std::atomic<boost::asio::io_context*>;

    explicit follow_executor(std::shared_ptr<home> h) noexcept : home_(std::move(h)) {}

    boost::asio::io_context& query(boost::asio::execution::context_t) const noexcept { return *home_->load(); }
    boost::asio::execution::blocking_t query(boost::asio::execution::blocking_t) const noexcept {
        return never_ ? boost::asio::execution::blocking_t(boost::asio::execution::blocking.never)
                      : boost::asio::execution::blocking_t(boost::asio::execution::blocking.possibly);
    }
    follow_executor require(boost::asio::execution::blocking_t::never_t) const noexcept { return with(true); }
    follow_executor require(boost::asio::execution::blocking_t::possibly_t) const noexcept { return with(false); }

    template <typename F>
    void execute(F&& f) const {
        auto ex = home_->load()->get_executor();
        if (never_)
            boost::asio::require(ex, boost::asio::execution::blocking.never).execute(std::forward<F>(f));
        else
            ex.execute(std::forward<F>(f));
    }

    friend bool operator==(const follow_executor& a, const follow_executor& b) noexcept {
        return a.home_ == b.home_ && a.never_ == b.never_;
    }
    friend bool operator!=(const follow_executor& a, const follow_executor& b) noexcept { return !(a == b); }

private:
    follow_executor with(bool never) const noexcept {
        follow_executor e(*this);
        e.never_ = never;
        return e;
    }

    std::shared_ptr<home> home_;
    bool never_ = false;
};

} // namespace rdmacm::detail
