#pragma once
// What every asynchronous operation's initiation does with its handler: outstanding work
// tracked until the handler has run (see work_of_followers), and the handler type-erased for
// the compiled core, keeping its associated executor, allocator and cancellation slot.
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
// object's executor: the initiation, on the executor the object has now (`at_start`: one that
// never changes), or the object itself (`by_object`: an id or a queue pair, which keeps work
// on whichever executor it has while it has a waiting operation, and takes it along when it
// moves — bound_executor). A handler with an executor of its own has its work tracked there.
enum class work_of_followers { at_start, by_object };

// The base of every operation's initiation, which is named as Asio's are
// (`initiate_post`...) and holds what the operation needs: the I/O object's shared state
// (one shared_ptr) and its executor. `Derived::get_executor()` is the object's executor (what
// asio::cancel_after and other token adapters of later Boosts ask of an initiation): for an
// object that moves (by_object), read from its state when asked, which takes its locks — an
// operation needs none to start: a handler that follows the object runs wherever the object
// is when it completes, one with an executor of its own has its work tracked there.
// `erase(handler)` gives the handler to the compiled core, its work tracked as
// work_of_followers says.
template <typename Derived, typename Signature, work_of_followers Followers = work_of_followers::at_start>
class initiation {
public:
    using executor_type = boost::asio::any_io_executor;

protected:
    template <typename Handler>
    completion_handler<Signature> erase(Handler&& h) const {
        using handler_type = std::decay_t<Handler>;
        if constexpr (Followers == work_of_followers::by_object && !has_own_executor<handler_type>) {
            return completion_handler<Signature>(std::forward<Handler>(h));
        } else if constexpr (Followers == work_of_followers::at_start && !has_own_executor<handler_type>) {
            // On the I/O object's executor, its work tracked from it as it is.
            return completion_handler<Signature>(tracked_handler<handler_type, executor_type>{
                std::forward<Handler>(h), boost::asio::make_work_guard(self().get_executor())});
        } else {
            // by_object: its own executor, asked without reading the object's — unless the
            // handler is type-erased (an any_completion_handler given as the token), whose type
            // claims an executor whether or not the handler inside has one.
            constexpr bool own_known =
                Followers == work_of_followers::by_object && !is_any_completion_handler<handler_type>;
            auto hex = boost::asio::get_associated_executor(h, own_known ? executor_type() : self().get_executor());
            using tracked = tracked_handler<handler_type, decltype(hex)>;
            return completion_handler<Signature>(tracked{std::forward<Handler>(h), boost::asio::make_work_guard(hex)});
        }
    }

private:
    const Derived& self() const noexcept { return static_cast<const Derived&>(*this); }
};

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
