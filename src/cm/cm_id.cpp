#include "rdmacm/cm_id.hpp"

#include "cm/context_channel.hpp"
#include "cm/id_impl.hpp"
#include "common/throw_if.hpp"
#include "rdmacm/detail/call_error.hpp"

namespace rdmacm {
namespace detail {

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

} // namespace detail
} // namespace rdmacm
