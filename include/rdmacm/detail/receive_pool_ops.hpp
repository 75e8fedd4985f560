#pragma once
// What the public headers do with a receive pool's shared state (receive_pool_impl,
// compiled in src/): its buffers, queues and lock stay out of what users include.
#include "rdmacm/detail/completion_handler.hpp"
#include "rdmacm/error.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>

namespace rdmacm {
class memory_region;
class received_message;
} // namespace rdmacm

namespace rdmacm::detail {

class qp_impl;
class receive_pool_impl;

namespace receive_pool_ops {
using handler = completion_handler<void(error_code, received_message)>;

// Whether a pool can have `depth` buffers of `message_size` bytes (each 1 .. 2^32 − 2:
// slots and sizes are 32-bit in work requests and completions).
constexpr bool valid_sizes(std::size_t depth, std::size_t message_size) noexcept {
    constexpr std::size_t most = std::numeric_limits<std::uint32_t>::max() - 1;
    return depth != 0 && message_size != 0 && depth <= most && message_size <= most;
}
// Registers `depth` buffers of `message_size` bytes on the queue pair's protection domain
// and posts a receive into each; throws system_error ("ibv_reg_mr"; errc::not_open with no
// queue pair), or std::invalid_argument for sizes that are not valid_sizes().
std::shared_ptr<receive_pool_impl> create(const std::shared_ptr<qp_impl>& qp, std::size_t depth,
                                          std::size_t message_size);
// The queue pair's (a copy: a migration changes it).
boost::asio::any_io_executor executor(const receive_pool_impl& pool);
const memory_region& region(const receive_pool_impl& pool) noexcept;
std::size_t message_size(const receive_pool_impl& pool) noexcept;
// A waiting operation ends (operation_aborted); buffers given back are not posted again.
void close(receive_pool_impl& pool) noexcept;
// Completes `h` with the next message, in arrival order; with no pool, errc::not_open on `ex`.
void receive(const std::shared_ptr<receive_pool_impl>& pool, const boost::asio::any_io_executor& ex, handler h);
// A message's buffer `slot`, back for another receive.
void give_back(receive_pool_impl& pool, std::uint32_t slot) noexcept;
} // namespace receive_pool_ops

} // namespace rdmacm::detail
