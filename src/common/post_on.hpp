#pragma once
// Posting the core's own continuations to a type-erased executor.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/execution/blocking.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/require.hpp>
#include <boost/asio/strand.hpp>

#include <utility>

namespace rdmacm::detail {

// Posts `f` to `ex`: executed, never inline, by the executor `ex` holds when that is an
// io_context's or a strand of one. Asio's post through the type-erased executor asks it
// for blocking.never, relationship.fork and an allocator (three executors made and let go
// of) and wraps the function twice (two allocations, and two more moves of it); post on
// the target binds it once more than its execute does. Same queue, same order, as a post
// (relationship.fork is those executors' own). For the core's own functions only: they
// have no associated executor or allocator (post would honour a handler's).
template <typename F>
void post_on(const boost::asio::any_io_executor& ex, F&& f) {
    using io_executor = boost::asio::io_context::executor_type;
    using boost::asio::execution::blocking;
    if (const auto* e = ex.target<io_executor>())
        boost::asio::require(*e, blocking.never).execute(std::forward<F>(f));
    else if (const auto* s = ex.target<boost::asio::strand<io_executor>>())
        boost::asio::require(*s, blocking.never).execute(std::forward<F>(f));
    else
        boost::asio::post(ex, std::forward<F>(f));
}

} // namespace rdmacm::detail
