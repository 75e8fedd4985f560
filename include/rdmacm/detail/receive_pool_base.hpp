#pragma once
// The compiled, executor-agnostic part of basic_receive_pool: a move-only handle on the
// pool's shared state (receive_pool_impl, compiled in src/: its buffers, queues and lock stay
// out of what users include), and the initiation of its receive. Defined in
// src/verbs/receive_pool.cpp.
#include "rdmacm/detail/initiation.hpp"
#include "rdmacm/detail/io_handle.hpp"
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

class receive_pool_base : public io_handle<receive_pool_base, receive_pool_impl> {
public:
    using handler = completion_handler<void(error_code, received_message)>;

    /// The memory the messages are in: a message's `data()` can be sent from it as it is.
    /// Throws system_error (errc::not_open) on a pool that is not open.
    const memory_region& region() const;
    /// 0 when not open.
    std::size_t message_size() const noexcept;
    bool is_open() const noexcept { return impl_ != nullptr; }
    /// Ends a waiting operation (operation_aborted); later ones get errc::not_open.
    void close() noexcept;

    // Whether a pool can have `depth` buffers of `message_size` bytes (each 1 .. 2^32 − 2:
    // slots and sizes are 32-bit in work requests and completions).
    static constexpr bool valid_sizes(std::size_t depth, std::size_t message_size) noexcept {
        constexpr std::size_t most = std::numeric_limits<std::uint32_t>::max() - 1;
        return depth != 0 && message_size != 0 && depth <= most && message_size <= most;
    }

    receive_pool_base(receive_pool_base&& other) noexcept = default;
    receive_pool_base& operator=(receive_pool_base&& other) noexcept = default;

protected:
    // Registers `depth` buffers of `message_size` bytes on the queue pair's protection domain
    // and posts a receive into each; throws system_error ("ibv_reg_mr"; errc::not_open with no
    // queue pair), or std::invalid_argument for sizes that are not valid_sizes().
    receive_pool_base(executor_type ex, const std::shared_ptr<qp_impl>& qp, std::size_t depth,
                      std::size_t message_size);
    // Not open, on `ex`.
    explicit receive_pool_base(executor_type ex) noexcept : io_handle(std::move(ex), nullptr) {}
    ~receive_pool_base() { close(); }

    // The queue pair's executor as it is now (it moves), or the handle's when not open.
    executor_type current_executor() const { return current_executor(impl_, executor_); }

    // Completes with the next message, in arrival order. Its work follows the queue pair
    // (by_object): a wait keeps it on the context the queue pair is on, which a move changes.
    struct initiate_receive
        : initiation<initiate_receive, void(error_code, received_message), work_of_followers::by_object> {
        std::shared_ptr<receive_pool_impl> impl;
        executor_type fallback;
        executor_type get_executor() const { return current_executor(impl, fallback); }
        template <typename Handler>
        void operator()(Handler&& h) const {
            receive(impl, fallback, this->erase(std::forward<Handler>(h)));
        }
    };
    template <typename Token>
    auto start_receive(Token&& token) {
        return boost::asio::async_initiate<Token, void(error_code, received_message)>(
            initiate_receive{{}, impl_, executor_}, token);
    }

private:
    static executor_type current_executor(const std::shared_ptr<receive_pool_impl>& impl,
                                          const executor_type& fallback);
    // With no pool, errc::not_open on `fallback`.
    static void receive(const std::shared_ptr<receive_pool_impl>& pool, const executor_type& fallback, handler h);
};

} // namespace rdmacm::detail
