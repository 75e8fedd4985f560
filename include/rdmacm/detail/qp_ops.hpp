#pragma once
// What the public headers do with a queue pair's shared state (qp_impl, compiled in
// src/): its completion queue, reader and locks stay out of what users include.
#include "rdmacm/detail/completion_handler.hpp"
#include "rdmacm/error.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <infiniband/verbs.h>

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

namespace qp_ops {
using handler = completion_handler<void(error_code, std::size_t)>;

// Creates the completion queue (on its context's shared channel), and the queue pair on `id`; throws
// system_error naming the failed call.
std::shared_ptr<qp_impl> create(const std::shared_ptr<id_impl>& id, const queue_pair_options& options);
// The id's (a copy: a migration changes it).
boost::asio::any_io_executor executor(const qp_impl& qp);
ibv_qp* native(const qp_impl& qp) noexcept;
// Outstanding operations complete with operation_aborted; the queue pair goes with its id.
void close(qp_impl& qp) noexcept;
// Posts `wr` on `qp`, `h` completing with the work completion's status and byte count;
// or completes `h` with why it cannot go, on the queue pair's executor: what `found` breaks
// (too many buffers, unregistered memory, too big a message...); with no queue pair,
// errc::not_open on `ex`.
void post(const std::shared_ptr<qp_impl>& qp, const boost::asio::any_io_executor& ex, const work_request& wr,
          const gathered_buffers& found, handler h);
} // namespace qp_ops

} // namespace rdmacm::detail
