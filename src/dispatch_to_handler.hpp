#pragma once
// Completing a type-erased handler from the compiled core.
#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <type_traits>
#include <utility>

namespace rdmacm::detail {

// Whether dispatch(ex, f) would run f inline here: this thread runs `ex`'s io_context (or is
// inside `ex`, a strand of one). Asked of the executors the library makes and users mostly
// give — as they come out of a type-erased handler too (any_completion_executor, holding the
// id's any_io_executor when the handler has none of its own); any other says no, and
// dispatch decides. (A dispatch through a type-erased executor wraps the function twice,
// with work tracked between: about 2,000 instructions per completion, more than the whole
// of a raw librdmacm event.)
template <typename AnyExecutor>
bool runs_here(const AnyExecutor& ex) noexcept {
    using io_executor = boost::asio::io_context::executor_type;
    if (const auto* e = ex.template target<io_executor>()) return e->running_in_this_thread();
    if (const auto* s = ex.template target<boost::asio::strand<io_executor>>()) return s->running_in_this_thread();
    if constexpr (!std::is_same_v<AnyExecutor, boost::asio::any_io_executor>)
        if (const auto* a = ex.template target<boost::asio::any_io_executor>()) return runs_here(*a);
    return false;
}

// Runs `handler(args...)` on its own associated executor (default `fallback`): inline if
// this thread runs that executor already, else queued there — never by way of another
// context (which would hold work on the handler's until after it ran). The executor is
// asked of the handler itself: `append(handler, ...)` gives a token, whose associated
// executor is always the fallback.
template <typename Handler, typename Executor, typename... Args>
void dispatch_to_handler(Handler handler, const Executor& fallback, Args&&... args) {
    auto ex = boost::asio::get_associated_executor(handler, fallback);
    using handler_executor = decltype(ex);
    if constexpr (std::is_same_v<handler_executor, boost::asio::any_io_executor> ||
                  std::is_same_v<handler_executor, boost::asio::any_completion_executor>) {
        if (runs_here(ex)) { // what dispatch would do, without its wrapping
            std::move(handler)(std::forward<Args>(args)...);
            return;
        }
    }
    boost::asio::dispatch(ex, boost::asio::append(std::move(handler), std::forward<Args>(args)...));
}

// The same, never inline: queued on `fallback` first (what follows a handler that threw).
template <typename Handler, typename Executor, typename... Args>
void post_to_handler_executor(Handler handler, const Executor& fallback, Args&&... args) {
    boost::asio::post(fallback,
                      [handler = std::move(handler), fallback, ... args = std::forward<Args>(args)]() mutable {
                          dispatch_to_handler(std::move(handler), fallback, std::move(args)...);
                      });
}

} // namespace rdmacm::detail
