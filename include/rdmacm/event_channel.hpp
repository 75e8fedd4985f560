#pragma once
/// @file
/// `rdmacm::event_channel`: an `rdma_event_channel` driven by Asio.
#include "rdmacm/detail/access.hpp"
#include "rdmacm/detail/event_channel_base.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/execution_context.hpp>

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

namespace rdmacm {

namespace detail {
// The library's core keeps executors type-erased (an id's changes when it migrates); a typed
// I/O object turns it back into its own type. Hence the requirement on every I/O object's
// Executor: constructible from any_io_executor (any_io_executor itself, and the
// executor_with_default of as_default_on, are; a strand is not — use
// bind_executor(strand, token) or a strand as the migration's executor instead).
template <typename Executor>
Executor executor_as(const boost::asio::any_io_executor& ex) {
    static_assert(std::is_constructible_v<Executor, const boost::asio::any_io_executor&>,
                  "asio-rdmacm: an I/O object's Executor must be constructible from any_io_executor");
    return Executor(ex);
}
} // namespace detail

/// An RDMA CM event channel whose fd is watched by an Asio `posix::stream_descriptor`.
///
/// One reader, on a strand of the channel's executor, reads every event to EAGAIN on each
/// readiness, copies it into a `cm_event`, acknowledges it at once and hands it to its id.
/// One channel serves any number of ids; ids keep it alive (the channel is destroyed after
/// its last id, the fd closed by librdmacm, never by Asio).
///
/// Work: while the channel is open or any id made on it lives, its reader keeps the
/// execution context running (outstanding work), even with no operation waiting — as a
/// pending read of a socket would. `run()` returns once the channel is closed and its last
/// id destroyed (an id's destruction, on a library thread, included). (The channel of a
/// context, which `cm_id(ctx)` and `listener(ctx)` use, keeps nothing running by itself:
/// there `run()` returns when no operation waits.)
///
/// Thread safety: distinct objects safe; shared objects unsafe. The reader itself runs on
/// its own strand, so the executor may be an io_context run by several threads.
///
/// The channel and its ids must be destroyed before their execution context, as with
/// every Asio I/O object.
///
/// `Executor`: as for every I/O object of the library, constructible from
/// `any_io_executor` (e.g. `any_io_executor`, the default, or what `as_default_on` makes).
template <typename Executor = boost::asio::any_io_executor>
class basic_event_channel : public detail::event_channel_base {
public:
    using executor_type = Executor;
    /// The same channel type on another executor type (e.g. for `as_default_on`).
    template <typename Executor1>
    struct rebind_executor {
        using other = basic_event_channel<Executor1>;
    };

    /// Creates the channel; throws `boost::system::system_error` naming the failed call
    /// (e.g. "rdma_create_event_channel": no RDMA CM in this kernel).
    explicit basic_event_channel(const executor_type& ex)
        : event_channel_base(boost::asio::any_io_executor(ex)), executor_(ex) {}
    template <typename ExecutionContext,
              typename = std::enable_if_t<std::is_convertible_v<ExecutionContext&, boost::asio::execution_context&>>>
    explicit basic_event_channel(ExecutionContext& ctx) : basic_event_channel(executor_type(ctx.get_executor())) {}

    // A moved-from channel keeps its executor, as Asio's I/O objects do.
    basic_event_channel(basic_event_channel&& other) noexcept
        // NOLINTNEXTLINE(bugprone-use-after-move): the base part only was moved
        : event_channel_base(std::move(other)), executor_(other.executor_) {}
    /// Takes over a channel of another executor type.
    template <typename Executor1, typename = std::enable_if_t<std::is_constructible_v<Executor, const Executor1&> &&
                                                              !std::is_same_v<Executor, Executor1>>>
    basic_event_channel(basic_event_channel<Executor1>&& other) noexcept // NOLINT(google-explicit-constructor)
        : event_channel_base(std::move(other)), executor_(other.get_executor()) {} // NOLINT(bugprone-use-after-move)
    basic_event_channel& operator=(basic_event_channel&& other) noexcept {
        if (this != &other) {
            event_channel_base::operator=(std::move(other));
            executor_ = other.executor_; // NOLINT(bugprone-use-after-move): the base part only was moved
        }
        return *this;
    }
    ~basic_event_channel() = default;

    /// The executor the channel's reader and, by default, its ids run on.
    const executor_type& get_executor() const noexcept { return executor_; }

private:
    executor_type executor_;
};

/// The event channel on any executor (`any_io_executor`).
using event_channel = basic_event_channel<>;

} // namespace rdmacm
