#include "rdmacm/endpoint.hpp"

#include <netinet/in.h>

#include <cstring>

namespace rdmacm::detail {

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

} // namespace rdmacm::detail
