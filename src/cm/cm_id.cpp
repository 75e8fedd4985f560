#include "rdmacm/cm_id.hpp"

#include "cm/context_channel.hpp"
#include "cm/id_impl.hpp"
#include "rdmacm/detail/call_error.hpp"
#include "rdmacm/listener.hpp"

#include <boost/system/system_error.hpp>

#include <cstring>

namespace rdmacm {
namespace detail {

endpoint to_endpoint(const sockaddr* sa) noexcept {
    endpoint ep;
    if (!sa) return ep;
    std::size_t len = sa->sa_family == AF_INET    ? sizeof(sockaddr_in)
                      : sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6)
                                                  : 0;
    if (len == 0) return ep;
    std::memcpy(ep.data(), sa, len);
    return ep;
}

bool supported(const endpoint& ep) noexcept {
    auto family = ep.data()->sa_family;
    return family == AF_INET || family == AF_INET6;
}

endpoint id_handle::local_endpoint() const noexcept {
    rdma_cm_id* id = native_handle();
    return id ? to_endpoint(rdma_get_local_addr(id)) : endpoint{};
}

endpoint id_handle::remote_endpoint() const noexcept {
    rdma_cm_id* id = native_handle();
    return id ? to_endpoint(rdma_get_peer_addr(id)) : endpoint{};
}

namespace {
// `what`: the member function, before the error's own message and location.
void throw_if(const error_code& ec, const char* what) {
    if (ec) throw boost::system::system_error(ec, what);
}
} // namespace

cm_id_base::cm_id_base(const executor_type& ex, const std::shared_ptr<channel_impl>& channel, rdma_port_space ps)
    : id_handle(ex, id_impl::create(channel, ex, ps)) {}

cm_id_base::cm_id_base(const executor_type& ex, rdma_port_space ps)
    : id_handle(ex, id_impl::create(context_channel(ex).get(), ex, ps)) {}

void cm_id_base::reject(std::span<const std::byte> private_data) {
    error_code ec;
    reject(private_data, ec);
    throw_if(ec, "cm_id::reject");
}

void cm_id_base::reject(std::span<const std::byte> private_data, error_code& ec) noexcept {
    ec = {};
    if (!impl_) {
        ec = errc::not_open;
    } else if (private_data.size() > 255) {
        ec = errc::private_data_too_long;
    } else {
        id_impl::call_guard guard(*impl_);
        if (!guard.id())
            ec = errc::not_open;
        else if (rdma_reject(guard.id(), private_data.data(), static_cast<std::uint8_t>(private_data.size())) != 0)
            ec = RDMACM_CALL_ERROR("rdma_reject");
        else
            impl_->set_pending_request(false);
    }
}

void cm_id_base::create_qp(ibv_qp_init_attr& attr, ibv_pd* pd) {
    error_code ec;
    create_qp(attr, pd, ec);
    throw_if(ec, "cm_id::create_qp");
}

void cm_id_base::create_qp(ibv_qp_init_attr& attr, ibv_pd* pd, error_code& ec) noexcept {
    ec = {};
    if (!impl_) {
        ec = errc::not_open;
        return;
    }
    id_impl::call_guard guard(*impl_);
    if (!guard.id())
        ec = errc::not_open;
    else if (!guard.id()->verbs) // (librdmacm would make completion queues on a null device: a crash)
        ec = errc::no_device;
    else if (rdma_create_qp(guard.id(), pd, &attr) != 0)
        ec = RDMACM_CALL_ERROR("rdma_create_qp");
}

ibv_qp* cm_id_base::qp() const noexcept {
    rdma_cm_id* id = native_handle();
    return id ? id->qp : nullptr;
}

cm_event cm_id_base::call_sync(op_kind kind, const op_call& call, error_code& ec) {
    if (!impl_) {
        ec = errc::not_open;
        return {};
    }
    return impl_->call_sync(kind, call, ec);
}

cm_event cm_id_base::call_sync(op_kind kind, const op_call& call) {
    error_code ec;
    auto ev = call_sync(kind, call, ec);
    throw_if(ec, "cm_id (synchronous mode)");
    return ev;
}

cm_event cm_id_base::next_event(std::chrono::milliseconds timeout) {
    error_code ec;
    auto ev = next_event(timeout, ec);
    throw_if(ec, "cm_id::next_event");
    return ev;
}

cm_event cm_id_base::next_event(std::chrono::milliseconds timeout, error_code& ec) {
    if (!impl_) {
        ec = errc::not_open;
        return {};
    }
    return impl_->next_event_sync(timeout, ec);
}

listener_base::listener_base(const executor_type& ex, const std::shared_ptr<channel_impl>& channel, rdma_port_space ps)
    : id_handle(ex, id_impl::create(channel, ex, ps)) {}

listener_base::listener_base(const executor_type& ex, rdma_port_space ps)
    : id_handle(ex, id_impl::create(context_channel(ex).get(), ex, ps)) {}

void listener_base::bind(const endpoint& local) {
    error_code ec;
    bind(local, ec);
    throw_if(ec, "listener::bind");
}

void listener_base::bind(const endpoint& local, error_code& ec) noexcept {
    ec = {};
    if (!impl_) {
        ec = errc::not_open;
    } else if (!supported(local)) {
        ec = errc::address_family_not_supported;
    } else {
        id_impl::call_guard guard(*impl_);
        endpoint address = local; // librdmacm takes a non-const sockaddr
        if (!guard.id())
            ec = errc::not_open;
        else if (rdma_bind_addr(guard.id(), address.data()) != 0)
            ec = RDMACM_CALL_ERROR("rdma_bind_addr");
    }
}

void listener_base::listen(int backlog) {
    error_code ec;
    listen(backlog, ec);
    throw_if(ec, "listener::listen");
}

void listener_base::listen(int backlog, error_code& ec) noexcept {
    ec = {};
    if (!impl_) {
        ec = errc::not_open;
    } else if (listening_) {
        ec = errc::already_listening;
    } else {
        // The kernel gets its maximum (0), and the bound is the library's (set_listening):
        // beyond it, requests are rejected at once. A kernel backlog would hold them back
        // instead (siw: a TCP listen queue), their peers hanging until they time out.
        id_impl::call_guard guard(*impl_);
        if (!guard.id()) {
            ec = errc::not_open;
        } else if (rdma_listen(guard.id(), 0) != 0) {
            ec = RDMACM_CALL_ERROR("rdma_listen");
        } else {
            listening_ = true;
            impl_->set_listening(backlog);
        }
    }
}

} // namespace detail
} // namespace rdmacm
