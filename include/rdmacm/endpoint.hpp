#pragma once
/// @file
/// `rdmacm::endpoint`: an IP address and port, as the RDMA CM takes them.
#include <boost/asio/ip/tcp.hpp>

namespace rdmacm {

/// IPv4 or IPv6 address plus port. The RDMA CM's TCP port space mirrors TCP's, so Asio's
/// TCP endpoint is the natural type: build it from `boost::asio::ip::make_address`. An
/// endpoint whose `data()` holds another family is refused with
/// errc::address_family_not_supported.
using endpoint = boost::asio::ip::tcp::endpoint;

namespace detail {
// The endpoint for a sockaddr librdmacm returned; empty for families we cannot represent.
endpoint to_endpoint(const sockaddr* sa) noexcept;
// Whether the CM can take this endpoint (IPv4 or IPv6).
bool supported(const endpoint& ep) noexcept;
} // namespace detail

} // namespace rdmacm
