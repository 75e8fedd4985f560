#include "rdmacm/stream.hpp"

#include "rdmacm/pooled_connection.hpp"

#include "stream/stream_impl.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>

#include <limits>
#include <memory>
#include <string_view>
#include <utility>

namespace rdmacm::detail {

stream_base::stream_base(const executor_type& ex, const stream_options& options) noexcept
    : io_handle(ex, nullptr), id_(access::make<cm_id>(empty_id{}, ex)), options_(options) {}

stream_base::stream_base(stream_base&& other) noexcept
    : io_handle(std::move(other)), id_(std::move(other.id_)), options_(other.options_),
      pooled_(std::move(other.pooled_)) {}

// (By member: io_handle's own assignment would leave `other` moved from before its id is.)
stream_base& stream_base::operator=(stream_base&& other) noexcept {
    if (this != &other) {
        close();
        executor_ = other.executor_; // (kept by the moved-from, as io_handle does)
        impl_ = std::move(other.impl_);
        id_ = std::move(other.id_);
        options_ = other.options_;
        pooled_ = std::move(other.pooled_);
    }
    return *this;
}

void stream_base::close() noexcept {
    if (auto impl = std::move(impl_)) impl->close();
    id().close();    // the connection's end for the peer (its reads: connection_reset)
    pooled_.reset(); // (out of its pool)
}

void stream_base::shutdown() noexcept {
    if (impl_) impl_->shutdown(nullptr);
}

std::array<std::byte, stream_hello_size> stream_base::hello() const noexcept {
    static_assert(stream_hello_size == stream_wire::hello_size);
    return impl_ ? stream_wire::encode(impl_->hello()) : std::array<std::byte, stream_hello_size>{};
}

namespace {

// The stream's queue pair. A data message is up to two writes (the peer's ring wraps) and a
// send; then the control message and a probe. A write gathers from two places where the
// send ring wraps; a small message's send from three (its header, then its bytes). A
// message with up to 64 bytes of data goes inline, as rsockets' sends of up to 64 bytes do
// (siw takes 80 bytes inline, rxe 512); a device that takes fewer may refuse the queue pair
// (EINVAL: some take 32 or 48), and the stream is then made without. (rdma-core 44's
// rdma_create_qp passes the provider's EINVAL on: seen with siw asked 96, rxe 1,024.)
std::shared_ptr<qp_impl> make_queue_pair(const std::shared_ptr<id_impl>& id, const stream_options& options) {
    queue_pair_options qp{.max_send_wr = 3 * options.send_depth + 2,
                          .max_recv_wr = options.depth,
                          .max_inline_data = stream_wire::header_size + 64,
                          .poll_for = options.poll_for,
                          .max_send_sge = 3,
                          .max_recv_sge = 1};
    try {
        return qp_impl::create(id, qp);
    } catch (const boost::system::system_error& e) {
        if (e.code() != boost::system::errc::invalid_argument ||
            std::string_view(e.code().location().function_name()) != "rdma_create_qp")
            throw;
    }
    qp.max_inline_data = 0;
    return qp_impl::create(id, qp);
}

} // namespace

error_code stream_base::prepare(stream_role role) noexcept {
    if (options_.depth < stream_wire::min_depth || options_.ring_size < stream_wire::min_ring_size ||
        options_.ring_size > stream_wire::max_ring_size || options_.send_depth == 0 ||
        options_.send_depth > (std::numeric_limits<std::uint32_t>::max() - 2) / 3 ||
        options_.keep_alive < std::chrono::milliseconds::zero() || options_.keep_alive > std::chrono::hours(24) ||
        options_.ack_timeout > owned_conn_params::max_ack_timeout)
        return RDMACM_CALL_ERRNO("stream_options", EINVAL);
    std::shared_ptr<qp_impl> qp;
    try {
        qp = make_queue_pair(access::impl(id()), options_);
        impl_ = stream_impl::create(qp, role, options_);
    } catch (const boost::system::system_error& e) {
        if (qp) qp->close();
        return e.code();
    } catch (const std::bad_alloc&) {
        if (qp) qp->close();
        return make_error_code(boost::system::errc::not_enough_memory);
    }
    return {};
}

error_code stream_base::opened(std::span<const std::byte> peer_private_data) noexcept {
    const auto peer = stream_wire::parse_hello(peer_private_data);
    if (!peer) return errc::protocol_error;
    return impl_ ? impl_->opened(*peer) : error_code(errc::not_open);
}

error_code stream_base::take(connection_request&& request) noexcept {
    if (!stream_wire::parse_hello(request.event.private_data())) {
        error_code ignored; // (the request goes either way)
        request.id.reject({}, ignored);
        return errc::protocol_error;
    }
    id_ = std::move(request.id);
    return open_on(request.event.private_data());
}

error_code stream_base::take(pooled_connection&& connection) noexcept {
    if (!stream_wire::parse_hello(connection.request().private_data())) {
        error_code ignored; // (the connection leaves its pool with the operation)
        connection.id().reject({}, ignored);
        return errc::protocol_error;
    }
    try {
        pooled_ = std::make_unique<pooled_connection>(std::move(connection));
    } catch (const std::bad_alloc&) {
        return make_error_code(boost::system::errc::not_enough_memory);
    }
    return open_on(pooled_->request().private_data());
}

error_code stream_base::open_on(std::span<const std::byte> peer_private_data) noexcept {
    if (const error_code ec = prepare(stream_role::server)) return ec;
    return impl_->opened(*stream_wire::parse_hello(peer_private_data));
}

void stream_base::accepted() noexcept {
    if (impl_) impl_->accepted();
}

stream_base::executor_type stream_base::current_executor(const std::shared_ptr<stream_impl>& impl,
                                                         const executor_type& fallback) {
    return impl ? impl->executor() : fallback;
}

void stream_base::start_read(const std::shared_ptr<stream_impl>& impl, const executor_type& fallback, handler h,
                             const mutable_buffer_list& buffers) {
    if (impl) return impl->read(std::move(h), buffers);
    boost::asio::post(fallback, boost::asio::append(std::move(h), errc::not_open, std::size_t{0}));
}

void stream_base::start_write(const std::shared_ptr<stream_impl>& impl, const executor_type& fallback, handler h,
                              const const_buffer_list& buffers) {
    if (impl) return impl->write(std::move(h), buffers);
    boost::asio::post(fallback, boost::asio::append(std::move(h), errc::not_open, std::size_t{0}));
}

void stream_base::start_prepare_write(const std::shared_ptr<stream_impl>& impl, const executor_type& fallback,
                                      fill_handler h, std::size_t max_size) {
    if (impl) return impl->prepare_write(std::move(h), max_size);
    boost::asio::post(fallback, boost::asio::append(std::move(h), errc::not_open, boost::asio::mutable_buffer()));
}

void stream_base::commit_write(std::size_t n) {
    error_code ec;
    commit_write(n, ec);
    if (ec) throw boost::system::system_error(ec, "commit_write");
}

void stream_base::commit_write(std::size_t n, error_code& ec) noexcept {
    ec = impl_ ? impl_->commit_write(n) : error_code(errc::not_open);
}

void stream_base::start_read_in_place(const std::shared_ptr<stream_impl>& impl, const executor_type& fallback,
                                      view_handler h, std::size_t max_size) {
    if (impl) return impl->read_in_place(std::move(h), max_size);
    boost::asio::post(fallback, boost::asio::append(std::move(h), errc::not_open, boost::asio::const_buffer()));
}

void stream_base::consume(std::size_t n) {
    error_code ec;
    consume(n, ec);
    if (ec) throw boost::system::system_error(ec, "consume");
}

void stream_base::consume(std::size_t n, error_code& ec) noexcept {
    ec = impl_ ? impl_->consume(n) : error_code(errc::not_open);
}

void stream_base::start_shutdown(const std::shared_ptr<stream_impl>& impl, const executor_type& fallback,
                                 shutdown_handler h) {
    if (impl) return impl->shutdown(std::move(h));
    boost::asio::post(fallback, boost::asio::append(std::move(h), error_code(errc::not_open)));
}

} // namespace rdmacm::detail
