// The stream's bytes on the wire (src/stream/stream_wire.hpp) without a device: a header and
// a hello read back as written, byte for byte as docs/stream-protocol.md has them, and every
// message or hello that breaks the protocol refused (the engine then fails the stream with
// errc::protocol_error, or refuses the connection).
#include "stream/stream_wire.hpp"

#include <boost/test/unit_test.hpp>

#include <vector>

namespace wire = rdmacm::detail::stream_wire;

namespace {
std::vector<std::byte> message(wire::header h, std::size_t payload = 0) {
    std::vector<std::byte> m(wire::header_size + payload, std::byte{'x'});
    wire::put(m.data(), h);
    return m;
}
} // namespace

BOOST_AUTO_TEST_CASE(a_header_reads_back_as_written_in_its_documented_bytes) {
    const auto m = message({wire::kind::data, 0x01020304, 0xa0b0c0d0, 7});
    const std::vector<std::byte> expected{std::byte{2},    std::byte{1},    std::byte{0},    std::byte{0},
                                          std::byte{4},    std::byte{3},    std::byte{2},    std::byte{1},
                                          std::byte{0xd0}, std::byte{0xc0}, std::byte{0xb0}, std::byte{0xa0},
                                          std::byte{7},    std::byte{0},    std::byte{0},    std::byte{0}};
    BOOST_TEST((m == expected));
    const auto h = wire::parse(m);
    BOOST_TEST_REQUIRE(h.has_value());
    BOOST_TEST((h->what == wire::kind::data));
    BOOST_TEST(h->posted == 0x01020304u);
    BOOST_TEST(h->consumed == 0xa0b0c0d0u);
    BOOST_TEST(h->length == 7u);
    // The same data carried in the message: exactly `length` bytes after the header.
    BOOST_TEST(wire::parse(message({wire::kind::data, 1, 2, 7}, 7)).has_value());
    BOOST_TEST(wire::parse(message({wire::kind::data, 1, 2, wire::inline_limit}, wire::inline_limit)).has_value());
    BOOST_TEST(wire::parse(message({wire::kind::end, 1, 2, 0})).has_value());
    BOOST_TEST(wire::parse(message({wire::kind::credits, 1, 2, 0})).has_value());
}

BOOST_AUTO_TEST_CASE(a_message_that_breaks_the_protocol_is_refused) {
    auto with = [](std::size_t at, std::byte b) {
        auto m = message({wire::kind::credits, 1, 2, 0});
        m[at] = b;
        return m;
    };
    BOOST_TEST(!wire::parse(std::vector<std::byte>(wire::header_size - 1)).has_value()); // short
    BOOST_TEST(!wire::parse(with(0, std::byte{1})).has_value());                         // version 1
    BOOST_TEST(!wire::parse(with(1, std::byte{4})).has_value());                         // no such kind
    BOOST_TEST(!wire::parse(with(2, std::byte{1})).has_value());                         // reserved
    BOOST_TEST(!wire::parse(with(3, std::byte{1})).has_value());                         // reserved
    BOOST_TEST(!wire::parse(message({wire::kind::data, 1, 2, 0})).has_value());          // data of nothing
    BOOST_TEST(!wire::parse(message({wire::kind::credits, 1, 2, 5})).has_value());       // a length for no data
    BOOST_TEST(!wire::parse(message({wire::kind::end, 1, 2, 0}, 1)).has_value());        // bytes after an end
    BOOST_TEST(!wire::parse(message({wire::kind::data, 1, 2, 7}, 6)).has_value());       // not its length
    BOOST_TEST(!wire::parse(message({wire::kind::data, 1, 2, wire::inline_limit + 1}, wire::inline_limit + 1))
                    .has_value()); // more than a message carries
}

BOOST_AUTO_TEST_CASE(a_hello_reads_back_as_written_and_one_out_of_range_is_refused) {
    const wire::hello mine{4, 262144, 0x1122334455667788, 0xcafe};
    const auto bytes = wire::encode(mine);
    BOOST_TEST((bytes[0] == std::byte{'A'} && bytes[1] == std::byte{'R'} && bytes[2] == std::byte{2}));
    std::vector<std::byte> padded(bytes.begin(), bytes.end());
    padded.resize(56); // (IB pads a connect's private data)
    const auto h = wire::parse_hello(padded);
    BOOST_TEST_REQUIRE(h.has_value());
    BOOST_TEST(h->depth == 4u);
    BOOST_TEST(h->ring_size == 262144u);
    BOOST_TEST(h->ring_address == 0x1122334455667788u);
    BOOST_TEST(h->rkey == 0xcafeu);
    BOOST_TEST(!wire::parse_hello(std::span(bytes).first(wire::hello_size - 1)).has_value()); // short
    for (const wire::hello bad :
         {wire::hello{2, 1024, 0, 0}, wire::hello{3, 1, 0, 0}, wire::hello{3, wire::max_ring_size + 1, 0, 0}})
        BOOST_TEST(!wire::parse_hello(wire::encode(bad)).has_value());
    auto older = bytes;
    older[2] = std::byte{1}; // version 1's hello
    BOOST_TEST(!wire::parse_hello(older).has_value());
}
