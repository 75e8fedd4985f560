#pragma once
// The one template every asynchronous operation goes through: async_initiate with the
// universal completion-token model, outstanding work tracked until the handler has run (see
// work_of_followers), and the handler type-erased for the compiled core, keeping its
// associated executor, allocator and cancellation slot.
#include "rdmacm/detail/completion_handler.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/associator.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>

#include <type_traits>
#include <utility>

namespace rdmacm::detail {

// A handler that keeps its executor's work count up until it has run or been destroyed.
template <typename Handler, typename Executor>
struct tracked_handler {
    Handler handler;
    boost::asio::executor_work_guard<Executor> work;

    template <typename... Args>
    void operator()(Args&&... args) && {
        std::move(handler)(std::forward<Args>(args)...);
        work.reset(); // after the handler returned (one that threw: with this object)
    }
};

// Whether a handler has an executor of its own (else it runs on its I/O object's).
struct no_executor {};
template <typename Handler>
inline constexpr bool has_own_executor =
    !std::is_same_v<boost::asio::associated_executor_t<Handler, no_executor>, no_executor>;

// Who keeps the context running while an operation waits, for a handler that runs on its I/O
// object's executor: async_start, on the executor the object has now (`at_start`: one that
// never changes), or the object itself (`by_object`: an id or a queue pair, which keeps work
// on whichever executor it has while it has a waiting operation, and takes it along when it
// moves — bound_executor). A handler with an executor of its own has its work tracked there.
enum class work_of_followers { at_start, by_object };

// The initiation of every operation: a named object with the I/O object's executor, as
// Asio's own are (what asio::cancel_after and other token adapters of later Boosts ask of an
// initiation), handed the handler and the operation's start. `ExecutorOf` is that executor
// (at_start), or, for an object that moves (by_object), what reads it when asked: such an
// operation needs none to start — a handler that follows the object runs wherever the
// object is when it completes, one with an executor of its own has its work tracked there
// — and reading it takes the object's locks, on every send and receive.
template <typename Signature, work_of_followers Followers, typename ExecutorOf>
class initiation {
public:
    using executor_type = boost::asio::any_io_executor;
    explicit initiation(ExecutorOf ex) noexcept : executor_of_(std::move(ex)) {}
    executor_type get_executor() const {
        if constexpr (Followers == work_of_followers::by_object)
            return executor_of_();
        else
            return executor_of_;
    }

    template <typename Handler, typename Start>
    void operator()(Handler handler, Start start) const {
        if constexpr (Followers == work_of_followers::by_object && !has_own_executor<Handler>) {
            start(completion_handler<Signature>(std::move(handler)));
        } else if constexpr (Followers == work_of_followers::at_start && !has_own_executor<Handler>) {
            // On the I/O object's executor, its work tracked from it as it is (not a copy).
            start(completion_handler<Signature>(tracked_handler<Handler, executor_type>{
                std::move(handler), boost::asio::make_work_guard(executor_of_)}));
        } else {
            // by_object: its own executor, asked without reading the object's — unless the
            // handler is type-erased (an any_completion_handler given as the token), whose type
            // claims an executor whether or not the handler inside has one.
            constexpr bool own_known = Followers == work_of_followers::by_object && !is_any_completion_handler<Handler>;
            auto hex = boost::asio::get_associated_executor(handler, own_known ? executor_type()
                                                                               : executor_type(get_executor()));
            using tracked = tracked_handler<Handler, decltype(hex)>;
            start(completion_handler<Signature>(tracked{std::move(handler), boost::asio::make_work_guard(hex)}));
        }
    }

private:
    ExecutorOf executor_of_;
};

template <typename Signature, work_of_followers Followers = work_of_followers::at_start, typename Token, typename Start>
requires(Followers == work_of_followers::at_start) auto async_start(const boost::asio::any_io_executor& io_ex,
                                                                    Token&& token, Start&& start) {
    return boost::asio::async_initiate<Token, Signature>(
        initiation<Signature, Followers, boost::asio::any_io_executor>(io_ex), token, std::forward<Start>(start));
}

// For an object that moves: `executor_of()` reads its executor (see initiation).
template <typename Signature, work_of_followers Followers, typename ExecutorOf, typename Token, typename Start>
requires(Followers == work_of_followers::by_object) auto async_start(ExecutorOf executor_of, Token&& token,
                                                                     Start&& start) {
    return boost::asio::async_initiate<Token, Signature>(
        initiation<Signature, Followers, ExecutorOf>(std::move(executor_of)), token, std::forward<Start>(start));
}

} // namespace rdmacm::detail

// The tracked handler is associated with whatever its inner handler is (executor,
// allocator, cancellation slot).
template <template <typename, typename> class Associator, typename Handler, typename Executor,
          typename DefaultCandidate>
struct boost::asio::associator<Associator, rdmacm::detail::tracked_handler<Handler, Executor>, DefaultCandidate>
    : Associator<Handler, DefaultCandidate> {
    static typename Associator<Handler, DefaultCandidate>::type
    get(const rdmacm::detail::tracked_handler<Handler, Executor>& h,
        const DefaultCandidate& c = DefaultCandidate()) noexcept {
        return Associator<Handler, DefaultCandidate>::get(h.handler, c);
    }
};
