#pragma once
// The stream's bytes on the wire (docs/stream-protocol.md): the 8-byte header every message
// begins with, and the 12-byte hello each side puts in the CM private data of the connect
// and the accept. Plain code without I/O: the stream's engine and the host tests share it.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace rdmacm::detail::stream_wire {

inline constexpr std::uint8_t version = 1;

enum class kind : std::uint8_t {
    data = 1,    // the payload follows, at least one byte
    end = 2,     // the sender sends no more data
    credits = 3, // only the count
};

inline constexpr std::size_t header_size = 8;

struct header {
    kind what;
    std::uint32_t posted; // receives the sender has posted for the receiver so far (mod 2^32)
};

inline void put_u32(std::byte* to, std::uint32_t v) noexcept {
    for (int i = 0; i < 4; ++i) to[i] = static_cast<std::byte>(v >> (8 * i));
}
inline std::uint32_t get_u32(const std::byte* from) noexcept {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= std::uint32_t{std::to_integer<std::uint8_t>(from[i])} << (8 * i);
    return v;
}

inline void put(std::byte* to, header h) noexcept {
    to[0] = std::byte{version};
    to[1] = static_cast<std::byte>(h.what);
    to[2] = to[3] = std::byte{0};
    put_u32(to + 4, h.posted);
}

// The header of a received message, or nothing when the message breaks the protocol (too
// short, another version or kind, reserved bytes set, a payload where none belongs, none
// where one does).
inline std::optional<header> parse(std::span<const std::byte> message) noexcept {
    if (message.size() < header_size || message[0] != std::byte{version} || message[2] != std::byte{0} ||
        message[3] != std::byte{0})
        return std::nullopt;
    const auto what = static_cast<kind>(message[1]);
    const bool payload = message.size() > header_size;
    if (what == kind::data ? !payload : (what != kind::end && what != kind::credits) || payload) return std::nullopt;
    return header{what, get_u32(message.data() + 4)};
}

// What each side tells the other as the connection opens.
struct hello {
    std::uint32_t depth;        // receives it keeps posted for the other's messages
    std::uint32_t message_size; // the longest message it receives, header included
};

inline constexpr std::size_t hello_size = 12;
// The fewest receives the credit rules work with (stream_credits.hpp), and the shortest
// receive that holds a data message.
inline constexpr std::uint32_t min_depth = 3;
inline constexpr std::uint32_t min_message_size = header_size + 1;

inline std::array<std::byte, hello_size> encode(hello h) noexcept {
    std::array<std::byte, hello_size> out{std::byte{'A'}, std::byte{'R'}, std::byte{version}, std::byte{0}};
    put_u32(out.data() + 4, h.depth);
    put_u32(out.data() + 8, h.message_size);
    return out;
}

// The peer's hello from the private data it sent (a transport may pad it: IB pads a
// connect's to 56 bytes), or nothing when it sent none, another version, or sizes the rules
// cannot work with.
inline std::optional<hello> parse_hello(std::span<const std::byte> data) noexcept {
    if (data.size() < hello_size || data[0] != std::byte{'A'} || data[1] != std::byte{'R'} ||
        data[2] != std::byte{version} || data[3] != std::byte{0})
        return std::nullopt;
    const hello h{get_u32(data.data() + 4), get_u32(data.data() + 8)};
    if (h.depth < min_depth || h.message_size < min_message_size) return std::nullopt;
    return h;
}

} // namespace rdmacm::detail::stream_wire
