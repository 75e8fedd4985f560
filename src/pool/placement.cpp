#include "rdmacm/placement.hpp"

#include <algorithm>
#include <atomic>
#include <memory>

namespace rdmacm {

placement_policy round_robin() {
    // Shared by the policy's copies: the pool may copy it.
    auto next = std::make_shared<std::atomic<std::size_t>>(0);
    return [next](std::span<const std::size_t> connections, const connection_request&) {
        return next->fetch_add(1, std::memory_order_relaxed) % connections.size();
    };
}

placement_policy least_connections() {
    return [](std::span<const std::size_t> connections, const connection_request&) {
        return static_cast<std::size_t>(std::min_element(connections.begin(), connections.end()) - connections.begin());
    };
}

} // namespace rdmacm
