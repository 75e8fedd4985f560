#pragma once
// Completing a type-erased handler from the compiled core.
#include <boost/asio/append.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <utility>

namespace rdmacm::detail {

// Runs `handler(args...)` on its own associated executor (default `fallback`): inline if
// this thread runs that executor already, else queued there — never by way of another
// context (which would hold work on the handler's until after it ran). The executor is
// asked of the handler itself: `append(handler, ...)` gives a token, whose associated
// executor is always the fallback.
template <typename Handler, typename Executor, typename... Args>
void dispatch_to_handler(Handler handler, const Executor& fallback, Args&&... args) {
    auto ex = boost::asio::get_associated_executor(handler, fallback);
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
