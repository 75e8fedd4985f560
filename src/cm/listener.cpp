#include "rdmacm/listener.hpp"

#include "cm/context_channel.hpp"
#include "cm/id_impl.hpp"
#include "common/throw_if.hpp"
#include "rdmacm/detail/call_error.hpp"

namespace rdmacm::detail {

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

} // namespace rdmacm::detail
