#pragma once
/// @file
/// `rdmacm::mutable_registered_buffer`, `rdmacm::const_registered_buffer`: a part of a
/// `memory_region` with the key the device knows it by, as Asio's registered buffers are a
/// part of a `buffer_registration`; and the sequences of them a queue pair's operations
/// take (scatter/gather lists).
#include "rdmacm/memory_region.hpp"

#include <boost/asio/buffer.hpp>

#include <concepts>
#include <cstdint>
#include <iterator>
#include <ranges>
#include <span>

namespace rdmacm {

/// A writable part of a memory region: where a receive or an RDMA read puts data.
/// Made by `rdmacm::buffer(mr, part)`; a part that does not lie inside its region is not
/// registered (`registered()` false), and an operation given it completes with
/// errc::buffer_not_registered. Valid while the region is.
class mutable_registered_buffer {
public:
    /// Empty (and registered: nothing to register).
    mutable_registered_buffer() noexcept = default;

    boost::asio::mutable_buffer buffer() const noexcept { return buffer_; }
    void* data() const noexcept { return buffer_.data(); }
    std::size_t size() const noexcept { return buffer_.size(); }
    /// The region's local key (`ibv_sge::lkey`).
    std::uint32_t lkey() const noexcept { return lkey_; }
    /// The region's remote key: what a peer's RDMA write or read of it names (`to_remote`).
    std::uint32_t rkey() const noexcept { return rkey_; }
    bool registered() const noexcept { return registered_; }

    /// Starts `n` bytes later (at most at its end), as Asio's buffers do.
    mutable_registered_buffer& operator+=(std::size_t n) noexcept {
        buffer_ += n;
        return *this;
    }

private:
    friend mutable_registered_buffer buffer(const memory_region& mr, std::span<std::byte> part) noexcept;
    friend mutable_registered_buffer buffer(const mutable_registered_buffer& b, std::size_t max_size) noexcept;
    mutable_registered_buffer(boost::asio::mutable_buffer b, const mutable_registered_buffer& keys) noexcept
        : buffer_(b), lkey_(keys.lkey_), rkey_(keys.rkey_), registered_(keys.registered_) {}
    mutable_registered_buffer(boost::asio::mutable_buffer b, const memory_region& mr, bool registered) noexcept
        : buffer_(b), lkey_(mr.lkey()), rkey_(mr.rkey()), registered_(registered) {}

    boost::asio::mutable_buffer buffer_;
    std::uint32_t lkey_ = 0, rkey_ = 0;
    bool registered_ = true;
};

/// A readable part of a memory region: what a send or an RDMA write takes data from. As
/// `mutable_registered_buffer` otherwise; one converts to it.
class const_registered_buffer {
public:
    const_registered_buffer() noexcept = default;
    const_registered_buffer(const mutable_registered_buffer& b) noexcept // NOLINT(google-explicit-constructor)
        : buffer_(b.buffer()), lkey_(b.lkey()), rkey_(b.rkey()), registered_(b.registered()) {}

    boost::asio::const_buffer buffer() const noexcept { return buffer_; }
    const void* data() const noexcept { return buffer_.data(); }
    std::size_t size() const noexcept { return buffer_.size(); }
    std::uint32_t lkey() const noexcept { return lkey_; }
    std::uint32_t rkey() const noexcept { return rkey_; }
    bool registered() const noexcept { return registered_; }

    const_registered_buffer& operator+=(std::size_t n) noexcept {
        buffer_ += n;
        return *this;
    }

private:
    friend const_registered_buffer buffer(const memory_region& mr, std::span<const std::byte> part) noexcept;
    friend const_registered_buffer buffer(const const_registered_buffer& b, std::size_t max_size) noexcept;
    const_registered_buffer(boost::asio::const_buffer b, const const_registered_buffer& keys) noexcept
        : buffer_(b), lkey_(keys.lkey_), rkey_(keys.rkey_), registered_(keys.registered_) {}
    const_registered_buffer(boost::asio::const_buffer b, const memory_region& mr, bool registered) noexcept
        : buffer_(b), lkey_(mr.lkey()), rkey_(mr.rkey()), registered_(registered) {}

    boost::asio::const_buffer buffer_;
    std::uint32_t lkey_ = 0, rkey_ = 0;
    bool registered_ = true;
};

/// `part` of `mr`, to receive or read into (not registered unless it lies inside `mr`, or
/// is empty).
inline mutable_registered_buffer buffer(const memory_region& mr, std::span<std::byte> part) noexcept {
    return {boost::asio::buffer(part.data(), part.size()), mr, part.empty() || mr.contains(part)};
}
/// `part` of `mr`, to send or write from (not registered unless it lies inside `mr`, or is
/// empty).
inline const_registered_buffer buffer(const memory_region& mr, std::span<const std::byte> part) noexcept {
    return {boost::asio::buffer(part.data(), part.size()), mr, part.empty() || mr.contains(part)};
}
/// Any contiguous range of bytes (a vector, an array, ...) as a part of `mr`: mutable unless
/// its bytes are const. (A span goes to the overloads above; anything else would convert
/// to either.)
template <typename Bytes>
requires std::ranges::contiguous_range<Bytes> && std::ranges::sized_range<Bytes> &&
    std::same_as<std::ranges::range_value_t<Bytes>, std::byte>
auto buffer(const memory_region& mr, Bytes&& part) noexcept {
    return buffer(mr, std::span(std::ranges::data(part), std::ranges::size(part)));
}
/// The whole of `mr`.
inline mutable_registered_buffer buffer(const memory_region& mr) noexcept { return buffer(mr, mr.buffer()); }

/// The first `max_size` bytes of `b` (all of it if shorter), as Asio's `buffer(b, n)`.
inline mutable_registered_buffer buffer(const mutable_registered_buffer& b, std::size_t max_size) noexcept {
    return {boost::asio::buffer(b.buffer(), max_size), b};
}
inline const_registered_buffer buffer(const const_registered_buffer& b, std::size_t max_size) noexcept {
    return {boost::asio::buffer(b.buffer(), max_size), b};
}
/// `b` without its first `n` bytes (empty if shorter), as Asio's `b + n`.
inline mutable_registered_buffer operator+(mutable_registered_buffer b, std::size_t n) noexcept { return b += n; }
inline mutable_registered_buffer operator+(std::size_t n, mutable_registered_buffer b) noexcept { return b += n; }
inline const_registered_buffer operator+(const_registered_buffer b, std::size_t n) noexcept { return b += n; }
inline const_registered_buffer operator+(std::size_t n, const_registered_buffer b) noexcept { return b += n; }

/// The description of `b` a peer needs to write or read it (its region's access flags must
/// allow that: IBV_ACCESS_REMOTE_WRITE / _READ).
inline remote_buffer to_remote(const const_registered_buffer& b) noexcept {
    return detail::remote_of(b.data(), b.size(), b.rkey());
}

/// One registered buffer (`Buffer`: `const_registered_buffer` or
/// `mutable_registered_buffer`), or a range of them (e.g. `std::array`, `std::vector`): a
/// scatter/gather list, one entry per buffer, as Asio's buffer sequences are.
template <typename T, typename Buffer>
concept registered_buffer_sequence = std::convertible_to<const T&, Buffer> ||
    (std::ranges::forward_range<const T>&& std::convertible_to<std::ranges::range_reference_t<const T>, Buffer>);

namespace detail {

// Calls f(Buffer) for each buffer of the sequence, in order.
template <typename Buffer, typename Sequence, typename F>
void for_each_buffer(const Sequence& buffers, F&& f) {
    if constexpr (std::convertible_to<const Sequence&, Buffer>)
        f(Buffer(buffers));
    else
        for (const auto& b : buffers) f(Buffer(b));
}

} // namespace detail

} // namespace rdmacm
