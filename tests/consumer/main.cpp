// Builds and links against asio-rdmacm; run, it says what it found (needs no RDMA device).
#include <rdmacm/rdmacm.hpp>

#include <iostream>

int main() {
    rdmacm::error_code ec = rdmacm::errc::rejected;
    std::cout << ec.category().name() << ": " << ec.message() << "\n";
    return ec == boost::system::errc::connection_refused ? 0 : 1;
}
