// TLS over rdmacm::stream (asio::ssl::stream<rdmacm::stream&>) on the kernel CM and a real
// (soft) device: the handshake with the server's certificate verified by the client, records
// both ways at once byte for byte through rings small enough that every record waits for
// credits, TLS's own close each way; and the end of the data without TLS's close, which a
// TLS reader must see as a truncation, not as the end.
#include "support/stream_pair.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>

#include <openssl/x509_vfy.h>

#include <random>
#include <string_view>
#include <vector>

using namespace rdmacm;
using namespace rdmacm::test;
using namespace boost::asio::experimental::awaitable_operators;
using asio::awaitable;
using asio::use_awaitable;
namespace ssl = asio::ssl;

namespace {

// A self-signed P-256 certificate for "rdmacm-test" and its key, made for this test alone
// (`openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 36500`).
constexpr std::string_view certificate = R"(-----BEGIN CERTIFICATE-----
MIIBgjCCASmgAwIBAgIUA/+4JZ7SuXTOPbtj5E6TbOAiMzUwCgYIKoZIzj0EAwIw
FjEUMBIGA1UEAwwLcmRtYWNtLXRlc3QwIBcNMjYxMjA3MjIxNDQxWhgPMjEyNjEx
MTMyMjE0NDFaMBYxFDASBgNVBAMMC3JkbWFjbS10ZXN0MFkwEwYHKoZIzj0CAQYI
KoZIzj0DAQcDQgAEijmgTwAzbGfeiUPcckJfCepHHuDyTp8ARQhX4PjXfwskTsIh
B4sfK9hD/JFmEBrOEZyBNzMFRTi0xMoSP1gnIaNTMFEwHQYDVR0OBBYEFENC5oHK
x/jS6Ot5CrytpYtU8sH5MB8GA1UdIwQYMBaAFENC5oHKx/jS6Ot5CrytpYtU8sH5
MA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDRwAwRAIgUZhGObuqFfgDA+gc
C7bhSTNUNTOlMq/PVrRgnvUwrKsCIE3Gn1Gx9n6jQaQ5aDMEMzOIlNDiop+Uqy7V
Xhm2F6qI
-----END CERTIFICATE-----
)";
constexpr std::string_view key = R"(-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgQbvA3kWBGA+Pu5ey
Z+5gnZ2QdM+ZRW3te71Gq0oKAmKhRANCAASKOaBPADNsZ96JQ9xyQl8J6kce4PJO
nwBFCFfg+Nd/CyROwiEHix8r2EP8kWYQGs4RnIE3MwVFOLTEyhI/WCch
-----END PRIVATE KEY-----
)";

ssl::context server_context() {
    ssl::context c(ssl::context::tls_server);
    c.use_certificate_chain(asio::buffer(certificate));
    c.use_private_key(asio::buffer(key), ssl::context::pem);
    return c;
}

// Verifies the server's certificate and name; not its dates (the certificate's start is the
// day it was made: a clock behind that would fail the test for nothing of the stream's).
ssl::context client_context() {
    ssl::context c(ssl::context::tls_client);
    c.add_certificate_authority(asio::buffer(certificate));
    X509_STORE_set_flags(SSL_CTX_get_cert_store(c.native_handle()), X509_V_FLAG_NO_CHECK_TIME);
    c.set_verify_mode(ssl::verify_peer);
    c.set_verify_callback(ssl::host_name_verification("rdmacm-test"));
    return c;
}

std::vector<unsigned char> random_bytes(std::size_t n, unsigned seed) {
    std::mt19937 g(seed);
    std::vector<unsigned char> v(n);
    for (auto& b : v) b = static_cast<unsigned char>(g());
    return v;
}

// Both ends of a stream, each under TLS, handshaken. (Made before the streams open: their
// executor is the same context's before and after.)
struct tls_pair {
    stream_pair p;
    ssl::context server_ctx = server_context(), client_ctx = client_context();
    ssl::stream<stream&> server{p.server, server_ctx}, client{p.client, client_ctx};

    explicit tls_pair(asio::io_context& ctx) : p(ctx, tight, tight) {}
    awaitable<void> open() {
        co_await p.open();
        co_await (server.async_handshake(ssl::stream_base::server, use_awaitable) &&
                  client.async_handshake(ssl::stream_base::client, use_awaitable));
    }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(tls_records_go_both_ways_at_once_then_each_side_closes, stream_fixture) {
    run(ctx, [&]() -> awaitable<void> {
        tls_pair t(ctx);
        co_await t.open();
        BOOST_TEST(SSL_get_verify_result(t.client.native_handle()) == X509_V_OK);

        // Each side writes while it reads the other's bytes: TLS records of up to 16 KiB
        // through rings of 1 KiB.
        const auto up = random_bytes(300000, 1), down = random_bytes(200000, 2);
        std::vector<unsigned char> got_up(up.size()), got_down(down.size());
        co_await (asio::async_write(t.client, asio::buffer(up), use_awaitable) &&
                  asio::async_read(t.server, asio::buffer(got_up), use_awaitable) &&
                  asio::async_write(t.server, asio::buffer(down), use_awaitable) &&
                  asio::async_read(t.client, asio::buffer(got_down), use_awaitable));
        BOOST_TEST((got_up == up));
        BOOST_TEST((got_down == down));

        // TLS's close: the client's close_notify is the server's end of the data; the
        // server answers with its own, which ends the client's shutdown.
        auto server_side = [&]() -> awaitable<void> {
            unsigned char byte;
            auto [ec, n] = co_await t.server.async_read_some(asio::buffer(&byte, 1), asio::as_tuple(use_awaitable));
            BOOST_TEST((ec == asio::error::eof), ec.message());
            co_await t.server.async_shutdown(use_awaitable);
        };
        co_await (server_side() && t.client.async_shutdown(use_awaitable));
        co_await (t.server.next_layer().async_shutdown(use_awaitable) &&
                  t.client.next_layer().async_shutdown(use_awaitable));
        t.server.next_layer().close();
        t.client.next_layer().close();
    }());
}

// A peer that ends its data (the stream's shutdown) without TLS's close: its reader gets
// what came before, then ssl::error::stream_truncated — never a clean end it could take
// for the whole message.
BOOST_FIXTURE_TEST_CASE(the_end_of_the_data_without_tls_close_is_a_truncation, stream_fixture) {
    run(ctx, [&]() -> awaitable<void> {
        tls_pair t(ctx);
        co_await t.open();
        const std::string_view sent = "the first half of a record";
        auto server_side = [&]() -> awaitable<void> {
            co_await asio::async_write(t.server, asio::buffer(sent), use_awaitable);
            co_await t.server.next_layer().async_shutdown(use_awaitable); // (delivered as the client reads)
        };
        auto client_side = [&]() -> awaitable<void> {
            std::string got(sent.size(), '\0');
            co_await asio::async_read(t.client, asio::buffer(got), use_awaitable);
            BOOST_TEST(got == sent);
            char more;
            auto [ec, n] = co_await t.client.async_read_some(asio::buffer(&more, 1), asio::as_tuple(use_awaitable));
            BOOST_TEST((ec == ssl::error::stream_truncated), ec.message());
            BOOST_TEST(n == 0u);
        };
        co_await (server_side() && client_side());
        t.server.next_layer().close();
        t.client.next_layer().close();
    }());
}
