// detail::id_handle: what cm_id and listener do with their id's shared state.
#include "rdmacm/detail/id_handle.hpp"

#include "cm/context_channel.hpp"
#include "cm/id_impl.hpp"

#include <boost/system/system_error.hpp>

#include <new>
#include <optional>

namespace rdmacm::detail {

id_handle::native_handle_type id_handle::native_handle() const noexcept {
    return impl_ && !impl_->closed() ? impl_->native() : nullptr;
}

void id_handle::cancel() noexcept {
    if (impl_) impl_->cancel();
}

void id_handle::close() noexcept {
    if (impl_) impl_->close();
}

endpoint id_handle::local_endpoint() const noexcept {
    rdma_cm_id* id = native_handle();
    return id ? to_endpoint(rdma_get_local_addr(id)) : endpoint{};
}

endpoint id_handle::remote_endpoint() const noexcept {
    rdma_cm_id* id = native_handle();
    return id ? to_endpoint(rdma_get_peer_addr(id)) : endpoint{};
}

id_handle::executor_type id_handle::current_executor(const std::shared_ptr<id_impl>& impl,
                                                     const executor_type& fallback) noexcept {
    return impl ? impl->get_executor() : fallback;
}

void id_handle::start_on(const id_ref& id, op_kind kind, any_handler h, const op_call& call) {
    if (id.impl)
        id.impl->start(kind, std::move(h), call);
    else
        id_impl::refuse(id.fallback, std::move(h), errc::not_open);
}

void id_handle::close_when_destroyed(const id_ref& id, void_handler h) {
    if (id.impl)
        id.impl->close_when_destroyed(std::move(h));
    else
        id_impl::refuse(id.fallback, std::move(h), {}); // nothing to close
}

void id_handle::migrate(const id_ref& id, const std::shared_ptr<channel_impl>& target, const executor_type& target_ex,
                        void_handler h) {
    if (!id.impl) return id_impl::refuse(id.fallback, std::move(h), errc::not_open);
    // On the id's executor as it is now: the handle's may be of a context it left.
    if (!target) return id_impl::refuse(id.impl->get_executor(), std::move(h), errc::channel_closed);
    if (!target_ex) return id_impl::refuse(id.impl->get_executor(), std::move(h), boost::asio::error::invalid_argument);
    id.impl->migrate(target, target_ex, std::move(h));
}

void id_handle::migrate_to_context(const id_ref& id, const executor_type& target_ex, void_handler h) {
    if (!id.impl) return id_impl::refuse(id.fallback, std::move(h), errc::not_open);
    const auto here = id.impl->get_executor(); // (as in migrate)
    if (!target_ex) return id_impl::refuse(here, std::move(h), boost::asio::error::invalid_argument);
    std::optional<owned_channel> target; // (held until the move took its own owner)
    try {
        target.emplace(context_channel(target_ex));
    } catch (const boost::system::system_error& e) {
        return id_impl::refuse(here, std::move(h), e.code());
    } catch (const std::bad_alloc&) {
        return id_impl::refuse(here, std::move(h), boost::asio::error::no_memory);
    }
    id.impl->migrate(target->get(), target_ex, std::move(h));
}

void id_handle::migrate_to_synchronous(const id_ref& id, void_handler h) {
    if (id.impl)
        id.impl->migrate(nullptr, {}, std::move(h));
    else
        id_impl::refuse(id.fallback, std::move(h), errc::not_open);
}

} // namespace rdmacm::detail
