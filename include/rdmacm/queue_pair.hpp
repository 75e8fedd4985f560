#pragma once
/// @file
/// `rdmacm::queue_pair`: a connection's data path — send, receive, RDMA write and read as
/// Asio asynchronous operations, completions read through the completion channel's fd.
#include "rdmacm/cm_id.hpp"
#include "rdmacm/detail/qp_impl.hpp"
#include "rdmacm/memory_region.hpp"

#include <span>

namespace rdmacm {

/// The sizes of a queue pair and its completion queue.
struct queue_pair_options {
    std::uint32_t max_send_wr = 64; ///< sends, writes and reads outstanding at once
    std::uint32_t max_recv_wr = 64; ///< receives posted at once
    std::uint32_t max_inline_data = 0;
    ibv_pd* pd = nullptr; ///< nullptr: the device's default protection domain (librdmacm's)
};

/// A reliable-connected queue pair on a `cm_id` (`rdma_create_qp`), with one completion
/// queue whose completion channel is read through an Asio descriptor on the id's
/// execution context. Create it before `async_connect` / `async_accept` (after the route
/// is resolved, or on a connection request's id); post receives before the peer sends.
///
/// **Operations**: any number outstanding at once, up to the queue pair's sizes (more:
/// ENOMEM from the post, as an error_code). Each completes with `void(error_code,
/// std::size_t)`: the work completion's status (`work_completion_category()`; e.g.
/// IBV_WC_REM_ACCESS_ERR for a bad rkey, IBV_WC_WR_FLUSH_ERR when the connection broke)
/// and its byte count (receives: the bytes received). Completions are polled in batches
/// and handed over in completion order.
///
/// **Executor**: handlers run on their associated executor, by default the id's
/// (`get_executor()`): when the id migrates, the data path moves with it — its completion
/// channel changes context, completions that arrive meanwhile are held and handed over on
/// the new executor first, and once `async_migrate` completed no completion handler runs
/// on the old one. Outstanding work is tracked on the handler's executor.
///
/// **Cancellation**: none per operation (a posted work request cannot be recalled).
/// `close()` (and closing the id) completes every outstanding operation with
/// operation_aborted at once.
///
/// **Lifetime**: the buffers and memory regions must outlive the operations. The queue
/// pair is destroyed with the id, and the completion queue after it; this object may go
/// first (then its operations are aborted).
///
/// **Thread safety**: operations may be started from any thread; `close()` too.
class queue_pair {
public:
    using executor_type = boost::asio::any_io_executor;

    /// Creates the completion queue and the queue pair on `id`. Throws system_error naming
    /// the failed call ("ibv_create_cq", "rdma_create_qp", ...), or errc::not_open.
    explicit queue_pair(cm_id& id, const queue_pair_options& options = {});
    queue_pair(queue_pair&&) noexcept = default;
    queue_pair& operator=(queue_pair&& other) noexcept {
        if (this != &other) {
            close();
            impl_ = std::move(other.impl_);
        }
        return *this;
    }
    ~queue_pair() { close(); }

    /// The id's executor (it follows the id's migrations).
    executor_type get_executor() const { return impl_ ? impl_->get_executor() : executor_; }
    ibv_qp* native_handle() const noexcept { return impl_ ? impl_->native() : nullptr; }
    /// The protection domain to register memory with.
    ibv_pd* pd() const noexcept { return impl_ ? impl_->native()->pd : nullptr; }
    bool is_open() const noexcept { return impl_ != nullptr; }
    /// Completes every outstanding operation with operation_aborted; later ones get
    /// errc::not_open. The queue pair itself goes with the id.
    void close() noexcept {
        if (auto impl = std::move(impl_)) impl->close();
    }

    /// Sends `data` (inside `mr`). Signature: `void(error_code, std::size_t)`.
    template <typename Token>
    auto async_send(const memory_region& mr, std::span<const std::byte> data, Token&& token) {
        return start(detail::work_request::kind::send, mr, data, {}, std::forward<Token>(token));
    }
    /// Receives one message into `buffer` (inside `mr`); completes with its length.
    template <typename Token>
    auto async_receive(const memory_region& mr, std::span<std::byte> buffer, Token&& token) {
        return start(detail::work_request::kind::receive, mr, buffer, {}, std::forward<Token>(token));
    }
    /// Writes `data` (inside `mr`) into the peer's `remote` buffer (RDMA write).
    template <typename Token>
    auto async_write(const memory_region& mr, std::span<const std::byte> data, const remote_buffer& remote,
                     Token&& token) {
        return start(detail::work_request::kind::write, mr, data, remote, std::forward<Token>(token));
    }
    /// Reads the peer's `remote` buffer into `buffer` (inside `mr`) (RDMA read).
    template <typename Token>
    auto async_read(const memory_region& mr, std::span<std::byte> buffer, const remote_buffer& remote, Token&& token) {
        return start(detail::work_request::kind::read, mr, buffer, remote, std::forward<Token>(token));
    }

private:
    template <typename Token>
    auto start(detail::work_request::kind what, const memory_region& mr, std::span<const std::byte> local,
               const remote_buffer& remote, Token&& token) {
        error_code refusal;
        if (!mr.contains(local))
            refusal = errc::buffer_not_registered;
        else if (what != detail::work_request::kind::send && what != detail::work_request::kind::receive &&
                 local.size() > remote.length)
            refusal = errc::remote_buffer_too_small;
        detail::work_request wr{what,
                                reinterpret_cast<std::uintptr_t>(local.data()),
                                static_cast<std::uint32_t>(local.size()),
                                mr.lkey(),
                                remote.address,
                                remote.rkey};
        return detail::async_start<void(error_code, std::size_t), detail::work_of_followers::by_object>(
            get_executor(), std::forward<Token>(token), [ex = get_executor(), impl = impl_, wr, refusal](auto handler) {
                if (impl && !refusal)
                    impl->post(wr, std::move(handler));
                else
                    detail::qp_impl::refuse(ex, std::move(handler), impl ? refusal : errc::not_open);
            });
    }

    executor_type executor_;
    std::shared_ptr<detail::qp_impl> impl_;
};

} // namespace rdmacm
