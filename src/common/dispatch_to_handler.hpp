#pragma once
// Completing a type-erased handler from the compiled core.
#include "rdmacm/detail/initiation.hpp"
#include "rdmacm/detail/follow_executor.hpp"

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/execution/blocking.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/strand.hpp>

#include <tuple>
#include <type_traits>
#include <utility>

namespace rdmacm::detail {

// A completion as an executor runs it inline: called as an lvalue, once, before execute()
// returns — so it refers to its arguments where the caller keeps them instead of copying
// them (a CM event is ~150 bytes, and an executor copies the function it runs once more).
template <typename Handler, typename... Args>
struct inline_call {
    Handler handler;
    std::tuple<Args&...> args;
    void operator()() {
        std::apply([this](Args&... a) { std::move(handler)(std::move(a)...); }, args);
    }
};

// Runs `make()` (an inline_call) through `ex`'s target, when that is an io_context's
// executor, or a strand of one or of a pooled connection's follow_executor, that would run
// it inline here (this thread runs that io_context, or is inside that strand, and
// blocking.never is not asked for): that executor's own `execute` then runs it at once, as
// dispatch would — the same fence, and an io_context's capture of an exception for run() —
// without dispatch's path through the type-erased executor, which wraps the function twice
// with work tracked between (about 2,000 instructions per completion, more than the whole
// of a raw librdmacm event). False, `make` not called, for any other executor.
template <typename AnyExecutor, typename Make>
bool execute_inline(const AnyExecutor& ex, Make make) {
    namespace execution = boost::asio::execution;
    using io_executor = boost::asio::io_context::executor_type;
    const auto may_block = [](const auto& e) {
        return boost::asio::query(e, execution::blocking) != execution::blocking.never;
    };
    if (const auto* e = ex.template target<io_executor>(); e && may_block(*e) && e->running_in_this_thread()) {
        e->execute(make());
        return true;
    }
    const auto in_strand = [&](const auto* s) {
        if (!s || !may_block(s->get_inner_executor()) || !s->running_in_this_thread()) return false;
        s->execute(make());
        return true;
    };
    return in_strand(ex.template target<boost::asio::strand<io_executor>>()) ||
           in_strand(ex.template target<boost::asio::strand<follow_executor>>());
}

// Runs `handler(args...)` on `ex`: inline if this thread runs it already, else queued there.
template <typename Handler, typename Executor, typename... Args>
void run_on(const Executor& ex, Handler& handler, Args&&... args) {
    if constexpr (std::is_same_v<Executor, boost::asio::any_io_executor> ||
                  std::is_same_v<Executor, boost::asio::any_completion_executor>) {
        const auto call = [&] {
            return inline_call<Handler, std::remove_reference_t<Args>...>{std::move(handler), {args...}};
        };
        if (execute_inline(ex, call)) return;
    }
    boost::asio::dispatch(ex, boost::asio::append(std::move(handler), std::forward<Args>(args)...));
}

// Runs `handler(args...)` on its own associated executor (default `fallback`): inline if
// this thread runs that executor already, else queued there — never by way of another
// context (which would hold work on the handler's until after it ran). The executor is
// asked of the handler itself: `append(handler, ...)` gives a token, whose associated
// executor is always the fallback.
//
// A type-erased handler is asked with an empty candidate: it answers with an empty executor
// when it has none of its own (most do: they follow their id or queue pair), and `fallback`
// runs it as it is. Asked with `fallback`, it would convert that any_io_executor to an
// any_completion_executor, which Boost 1.81 does by allocating a shared copy of it: ~150
// instructions with the free, on every completion.
template <typename Handler, typename Executor, typename... Args>
void dispatch_to_handler(Handler handler, const Executor& fallback, Args&&... args) {
    if constexpr (is_any_completion_handler<Handler>) {
        if (auto own = boost::asio::get_associated_executor(handler, boost::asio::any_completion_executor()))
            return run_on(own, handler, std::forward<Args>(args)...);
        return run_on(fallback, handler, std::forward<Args>(args)...);
    } else {
        return run_on(boost::asio::get_associated_executor(handler, fallback), handler, std::forward<Args>(args)...);
    }
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
