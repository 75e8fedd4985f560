#pragma once
// The stream's bytes on the wire (docs/stream-protocol.md): the 16-byte header of the
// message that tells of each write into the peer's ring, or carries a small one itself
// (and of credits), and the 24-byte hello each side puts in the CM private data of
// the connect and the accept. Plain code without I/O: the stream's engine and the host tests share it.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace rdmacm::detail::stream_wire {

// 2: data by RDMA write into the peer's ring, each write told of by a message (2026-12-07);
// 1 carried the data in the messages themselves.
inline constexpr std::uint8_t version = 2;

enum class kind : std::uint8_t {
    data = 1,    // `length` bytes were written into the receiver's ring before it
    end = 2,     // the sender sends no more data
    credits = 3, // only the counts
};

inline constexpr std::size_t header_size = 16;
// A data message of at most this many bytes carries them itself, after its header (one
// packet at RoCE's usual MTU of 1,024, where a write and a send would be two); the receiver
// copies them into its ring, where larger messages' bytes were written. A receive holds a
// message of either kind.
inline constexpr std::uint32_t inline_limit = 1008;
inline constexpr std::size_t message_size = header_size + inline_limit;

struct header {
    kind what;
    std::uint32_t posted;   // receives the sender has posted for the receiver so far (mod 2^32)
    std::uint32_t consumed; // bytes the sender has read out of its ring so far (mod 2^32)
    std::uint32_t length;   // data: the bytes written before it (else 0)
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
    put_u32(to + 8, h.consumed);
    put_u32(to + 12, h.length);
}

// A received message's header, or nothing when the message breaks the protocol (shorter
// than a header, another version or kind, reserved bytes set, a length where none belongs,
// none where one does, bytes after the header other than a data message's own). A data
// message of `length` bytes is `header_size` long (they were written into the ring) or
// `header_size + length` (they follow: at most inline_limit).
inline std::optional<header> parse(std::span<const std::byte> message) noexcept {
    if (message.size() < header_size || message[0] != std::byte{version} || message[2] != std::byte{0} ||
        message[3] != std::byte{0})
        return std::nullopt;
    const header h{static_cast<kind>(message[1]), get_u32(message.data() + 4), get_u32(message.data() + 8),
                   get_u32(message.data() + 12)};
    const std::size_t after = message.size() - header_size;
    if (h.what == kind::data ? h.length == 0 || (after != 0 && (after != h.length || h.length > inline_limit))
                             : (h.what != kind::end && h.what != kind::credits) || h.length != 0 || after != 0)
        return std::nullopt;
    return h;
}

// What each side tells the other as the connection opens: its receives, and the ring the
// other writes its data into.
struct hello {
    std::uint32_t depth;     // receives it keeps posted for the other's messages
    std::uint32_t ring_size; // bytes of its ring
    std::uint64_t ring_address;
    std::uint32_t rkey;
};

inline constexpr std::size_t hello_size = 24;
// The fewest receives the credit rules work with, and the smallest and largest ring (counts of
// its bytes wrap at 2^32 and are compared as signed differences, so a count may move by
// less than 2^31 at once: a header tells of at most a whole ring read, stream_credits.hpp).
inline constexpr std::uint32_t min_depth = 3;
inline constexpr std::uint32_t min_ring_size = 2;
inline constexpr std::uint32_t max_ring_size = std::uint32_t{1} << 30;

inline std::array<std::byte, hello_size> encode(hello h) noexcept {
    std::array<std::byte, hello_size> out{std::byte{'A'}, std::byte{'R'}, std::byte{version}, std::byte{0}};
    put_u32(out.data() + 4, h.depth);
    put_u32(out.data() + 8, h.ring_size);
    put_u32(out.data() + 12, static_cast<std::uint32_t>(h.ring_address));
    put_u32(out.data() + 16, static_cast<std::uint32_t>(h.ring_address >> 32));
    put_u32(out.data() + 20, h.rkey);
    return out;
}

// The peer's hello from the private data it sent (a transport may pad it: IB pads a
// connect's to 56 bytes), or nothing when it sent none, another version, or sizes the rules
// cannot work with.
inline std::optional<hello> parse_hello(std::span<const std::byte> data) noexcept {
    if (data.size() < hello_size || data[0] != std::byte{'A'} || data[1] != std::byte{'R'} ||
        data[2] != std::byte{version} || data[3] != std::byte{0})
        return std::nullopt;
    const hello h{get_u32(data.data() + 4), get_u32(data.data() + 8),
                  get_u32(data.data() + 12) | std::uint64_t{get_u32(data.data() + 16)} << 32,
                  get_u32(data.data() + 20)};
    if (h.depth < min_depth || h.ring_size < min_ring_size || h.ring_size > max_ring_size) return std::nullopt;
    return h;
}

} // namespace rdmacm::detail::stream_wire
