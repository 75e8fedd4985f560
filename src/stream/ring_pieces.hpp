#pragma once
// A stream's rings (src/stream/stream_impl.hpp) are counted by cumulative position; a run of
// bytes at a position wraps around the ring's end at most once.
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace rdmacm::detail {

// The one or two pieces — f(offset, length, bytes before it) — that `n` bytes from position
// `at` take in a ring of `size` bytes (at most `size` of them: they wrap once at most).
template <typename F>
void ring_pieces(std::uint64_t at, std::size_t n, std::size_t size, F&& f) {
    const std::size_t offset = at % size, first = std::min(n, size - offset);
    if (first > 0) f(offset, first, std::size_t{0});
    if (n > first) f(std::size_t{0}, n - first, first);
}

} // namespace rdmacm::detail
