#include "rdmacm/pooled_connection.hpp"

#include "pool/pool_impl.hpp"

namespace rdmacm {

pooled_connection::pooled_connection(cm_id id, const cm_event& request, std::shared_ptr<detail::pooled_state> state,
                                     executor_type ex) noexcept
    : id_(std::move(id)), request_(request), state_(std::move(state)), executor_(std::move(ex)) {}

pooled_connection& pooled_connection::operator=(pooled_connection&& other) noexcept {
    if (this != &other) {
        leave();
        id_ = std::move(other.id_);
        request_ = other.request_;
        state_ = std::move(other.state_);
        executor_ = std::move(other.executor_);
    }
    return *this;
}

void pooled_connection::leave() noexcept {
    id_.close();
    if (!state_) return;
    if (auto pool = state_->pool.lock()) pool->remove(*state_);
    state_.reset();
}

std::size_t pooled_connection::shard() const noexcept { return state_ ? state_->shard.load() : 0; }
std::uint64_t pooled_connection::key() const noexcept { return state_ ? state_->key : 0; }
void pooled_connection::set_load(double load) noexcept {
    if (state_) state_->load = load;
}
double pooled_connection::load() const noexcept { return state_ ? state_->load.load() : 0; }

} // namespace rdmacm
