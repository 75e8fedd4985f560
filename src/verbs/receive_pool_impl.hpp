#pragma once
// The shared state behind a receive_pool (compiled in src/verbs/receive_pool.cpp): its buffers,
// the receives it keeps posted in them, the messages that arrived and are not yet taken,
// and the one operation waiting for the next.
//
// A message stays in the pool until the operation's handler is about to run, on its own
// executor: a cancellation that reaches the operation before then ends it with
// operation_aborted and leaves the message for the next receive. (Taken when the
// completion is queued, a message would be lost whenever the operation lost a race it had
// won already: in `receive || timer`, the timer's handler queued first cancels a receive
// whose message is on its way, and the group drops the receive's result.)
//
// Lifetime: each posted receive's handler holds the pool, because the device writes into
// its buffer until the receive completes (flushed, at the latest, when the queue pair
// closes). Messages handed out hold it too: they give their buffer back when destroyed.
#include "verbs/qp_impl.hpp"
#include "rdmacm/detail/receive_pool_base.hpp"
#include "rdmacm/error.hpp"
#include "rdmacm/memory_region.hpp"

#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

namespace rdmacm {
class received_message;
}

namespace rdmacm::detail {

class receive_pool_impl final : public std::enable_shared_from_this<receive_pool_impl>, public context_user {
public:
    using handler = receive_pool_base::handler;

    // Registers `depth` buffers of `message_size` bytes on the queue pair's protection
    // domain and posts a receive into each; throws system_error ("ibv_reg_mr"), or
    // std::invalid_argument for sizes that are not receive_pool_base::valid_sizes().
    static std::shared_ptr<receive_pool_impl> create(std::shared_ptr<qp_impl> qp, std::size_t depth,
                                                     std::size_t message_size);

    // Completes `h` with the next message (in arrival order), or the error that broke the
    // queue pair once every message before it was taken.
    void receive(handler h);
    // Completes `h` with `ec` on `ex` (nothing to receive from).
    static void refuse(const boost::asio::any_io_executor& ex, handler h, error_code ec);
    boost::asio::any_io_executor executor() const { return qp_->get_executor(); }
    // A message's buffer, back for another receive.
    void give_back(std::uint32_t slot) noexcept;
    std::span<const std::byte> data(std::uint32_t slot, std::uint32_t size) const noexcept {
        return std::span<const std::byte>(memory_->buffer).subspan(std::size_t{slot} * slot_size_, size);
    }
    const memory_region& region() const noexcept { return memory_->region; }
    std::size_t message_size() const noexcept { return slot_size_; }
    // The owner is gone: a waiting operation ends (operation_aborted), buffers given back
    // are not posted again.
    void close() noexcept;
    // The queue pair's context shut down (told by the queue pair, after its own handlers
    // went): a waiting operation's handler goes, never called, as Asio's do.
    void context_gone() noexcept override;

private:
    struct arrival {
        error_code ec;
        std::uint32_t slot;
        std::uint32_t size;
    };
    struct waiter {
        handler h;
        std::uint64_t id;
    };
    receive_pool_impl(std::shared_ptr<qp_impl> qp, ibv_pd* pd, std::size_t depth, std::size_t message_size);
    void post(std::uint32_t slot);
    void arrived(arrival a);
    void cancel(std::uint64_t id) noexcept;
    // The woken operation will complete: its handler is queued, and takes the next message
    // (or the error, or operation_aborted if cancelled meanwhile) when it is about to run.
    void wake(handler h);
    void deliver(handler h);
    void abort(handler h);
    // The waiting operation's handler, taken out (it no longer waits). Under the lock.
    handler take_waiting() noexcept;

    // The buffers and their registration, shared with the queue pair: the device may write
    // into them until the queue pair is destroyed, and the registration must go then,
    // before the id (qp_impl::on_destroyed).
    struct memory {
        std::vector<std::byte> buffer;
        memory_region region;
    };
    std::shared_ptr<qp_impl> qp_;
    std::size_t slot_size_;
    std::shared_ptr<memory> memory_;
    std::mutex mutex_;
    std::deque<arrival> arrived_;
    std::optional<waiter> waiting_;
    std::uint64_t next_wait_ = 0;
    // The operation woken (its handler queued) and not yet run, and whether a cancellation
    // reached it meanwhile.
    std::optional<std::uint64_t> woken_;
    bool woken_cancelled_ = false;
    error_code broken_; // the first error a receive completed with: the queue pair is in error
    bool closed_ = false;
};

} // namespace rdmacm::detail
