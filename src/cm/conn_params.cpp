#include "rdmacm/conn_params.hpp"

#include "rdmacm/detail/call_error.hpp"

#include <algorithm>

namespace rdmacm::detail {

owned_conn_params::owned_conn_params(const conn_params& p) noexcept : params_(p) {
    if (p.ack_timeout > max_ack_timeout) error_ = RDMACM_CALL_ERRNO("conn_params::ack_timeout", EINVAL);
    if (p.private_data.size() > data_.size()) {
        error_ = errc::private_data_too_long;
        params_.private_data = {};
        return;
    }
    std::copy(p.private_data.begin(), p.private_data.end(), data_.begin());
    params_.private_data = {data_.data(), p.private_data.size()};
}

rdma_conn_param owned_conn_params::native() const noexcept {
    rdma_conn_param n{};
    n.private_data = params_.private_data.empty() ? nullptr : data_.data();
    n.private_data_len = static_cast<std::uint8_t>(params_.private_data.size());
    n.responder_resources = params_.responder_resources;
    n.initiator_depth = params_.initiator_depth;
    n.flow_control = params_.flow_control;
    n.retry_count = params_.retry_count;
    n.rnr_retry_count = params_.rnr_retry_count;
    return n;
}

} // namespace rdmacm::detail
