#pragma once
// The compiled, executor-agnostic part of basic_queue_pair: a move-only handle on the queue
// pair's shared state (qp_impl, compiled in src/: its completion queue, reader and locks stay
// out of what users include), and the initiation of its operations. Defined in
// src/verbs/queue_pair.cpp.
#include "rdmacm/detail/initiation.hpp"
#include "rdmacm/detail/io_handle.hpp"
#include "rdmacm/error.hpp"
#include "rdmacm/memory_region.hpp"
#include "rdmacm/registered_buffer.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <infiniband/verbs.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace rdmacm {
struct queue_pair_options;
}

namespace rdmacm::detail {

class id_impl;
class qp_impl;

// The most buffers one operation takes (its scatter/gather list is built on the stack).
inline constexpr std::size_t max_buffers_per_operation = 32;
// The largest message refused no further (InfiniBand's 2^31; a bigger one would not fit the
// 32-bit lengths of a scatter/gather list or a work completion). A device may allow less.
inline constexpr std::size_t max_message_size = std::size_t{1} << 31;

// One work request: what to post, from which registered memory.
struct work_request {
    enum class kind : std::uint8_t { send, receive, write, read };
    kind what;
    std::span<const ibv_sge> buffers;
    std::uint64_t remote_address = 0; // write, read
    std::uint32_t rkey = 0;
};

// What was found while an operation's scatter/gather list was built: whether it may go.
struct gathered_buffers {
    std::size_t count = 0;           // buffers given (beyond max_buffers_per_operation: refused)
    std::size_t bytes = 0;           // in all
    bool registered = true;          // each lies inside its region
    std::uint32_t remote_length = 0; // the peer's buffer's (write, read)
};

class queue_pair_base : public io_handle<queue_pair_base, qp_impl> {
public:
    using native_handle_type = ibv_qp*;
    using handler = completion_handler<void(error_code, std::size_t)>;

    /// Null once the queue pair is closed, also by its id's close: the queue pair then goes
    /// with the id, on the library's destroyer thread.
    native_handle_type native_handle() const noexcept;
    /// The protection domain to register memory with; null once the queue pair is closed
    /// (as native_handle()): a memory_region or receive_pool made on it then fails.
    ibv_pd* pd() const noexcept {
        auto* qp = native_handle();
        return qp ? qp->pd : nullptr;
    }
    bool is_open() const noexcept { return impl_ != nullptr; }
    /// Completes every outstanding operation with operation_aborted, each once the device
    /// has let go of its buffers: the queue pair goes to the error state and the handlers
    /// complete from the device's flush (for a device that never flushes some, siw after
    /// its connection went: 100 ms later). Later ones get errc::not_open. The queue pair
    /// itself goes with the id.
    void close() noexcept;

    queue_pair_base(queue_pair_base&& other) noexcept = default;
    queue_pair_base& operator=(queue_pair_base&& other) noexcept = default;

protected:
    // Creates the completion queue (on its context's shared channel), and the queue pair on
    // `id`; throws system_error naming the failed call.
    queue_pair_base(executor_type ex, const std::shared_ptr<id_impl>& id, const queue_pair_options& options);
    // Not open, on `ex`.
    explicit queue_pair_base(executor_type ex) noexcept : io_handle(std::move(ex), nullptr) {}
    ~queue_pair_base() { close(); }

    // The id's executor as it is now (it moves), or the handle's when the queue pair is not open.
    executor_type current_executor() const { return current_executor(impl_, executor_); }

    // Posts the buffers as one work request, its scatter/gather list built on the stack in
    // the same pass that checks them (a refusal completes like any operation, never inline).
    template <typename Buffer>
    struct initiate_post
        : initiation<initiate_post<Buffer>, void(error_code, std::size_t), work_of_followers::by_object> {
        std::shared_ptr<qp_impl> impl;
        executor_type fallback;
        executor_type get_executor() const { return current_executor(impl, fallback); }
        template <typename Handler, typename Buffers>
        void operator()(Handler&& h, work_request::kind what, const Buffers& buffers,
                        const remote_buffer& remote) const {
            std::array<ibv_sge, max_buffers_per_operation> sges;
            gathered_buffers found{.remote_length = remote.length};
            for_each_buffer<Buffer>(buffers, [&](const Buffer& b) {
                if (found.count < sges.size())
                    sges[found.count] = {reinterpret_cast<std::uintptr_t>(b.data()),
                                         static_cast<std::uint32_t>(b.size()), b.lkey()};
                ++found.count; // (beyond the array: refused, never posted)
                found.bytes += b.size();
                found.registered = found.registered && b.registered();
            });
            const auto n = std::min(found.count, sges.size());
            post(impl, fallback, {what, std::span(sges).first(n), remote.address, remote.rkey}, found,
                 this->erase(std::forward<Handler>(h)));
        }
    };
    template <typename Buffer, typename Token, typename Buffers>
    auto start_post(work_request::kind what, const Buffers& buffers, const remote_buffer& remote, Token&& token) {
        return boost::asio::async_initiate<Token, void(error_code, std::size_t)>(
            initiate_post<Buffer>{{}, impl_, executor_}, token, what, buffers, remote);
    }

private:
    static executor_type current_executor(const std::shared_ptr<qp_impl>& impl, const executor_type& fallback);
    // Posts `wr` on the queue pair, `h` completing with the work completion's status and
    // byte count; or completes `h` with why it cannot go, on the queue pair's executor: what
    // `found` breaks (too many buffers, unregistered memory, too big a message...); with no
    // queue pair, errc::not_open on the handle's executor.
    static void post(const std::shared_ptr<qp_impl>& qp, const executor_type& fallback, const work_request& wr,
                     const gathered_buffers& found, handler h);
};

} // namespace rdmacm::detail
