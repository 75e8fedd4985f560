#pragma once
/// @file
/// `rdmacm::buffer_registration`, `rdmacm::register_buffers`: the buffers of a sequence
/// registered together, as Asio's `buffer_registration` / `register_buffers` are.
#include "rdmacm/memory_region.hpp"
#include "rdmacm/registered_buffer.hpp"

#include <boost/asio/buffer.hpp>

#include <cstddef>
#include <iterator>
#include <span>
#include <vector>

namespace rdmacm {

/// Each buffer of a mutable buffer sequence registered with a protection domain (one
/// `memory_region` each), seen as a sequence of `mutable_registered_buffer`s — the
/// counterpart of Asio's `buffer_registration`, with `ibv_pd` for the execution context:
/// @code
/// std::vector<boost::asio::mutable_buffer> buffers{boost::asio::buffer(header), boost::asio::buffer(body)};
/// auto registered = rdmacm::register_buffers(qp.pd(), buffers);
/// co_await qp.async_send(std::array{rdmacm::buffer(registered[0], n), registered[1] + 16}, asio::use_awaitable);
/// @endcode
/// The buffers are the caller's and must outlive the registration; its registered buffers
/// are valid while it is. Registration fails as a whole: a buffer that cannot be registered
/// (memory not mapped; an empty one, on some devices) throws system_error ("ibv_reg_mr")
/// with the buffers before it deregistered again. Move-only; thread safety as for a plain
/// value.
class buffer_registration {
public:
    using value_type = mutable_registered_buffer;
    using const_iterator = std::vector<mutable_registered_buffer>::const_iterator;

    /// Nothing registered.
    buffer_registration() noexcept = default;
    /// Registers each buffer of `buffers` (an Asio mutable buffer sequence) with `pd` (e.g.
    /// `queue_pair::pd()`). `access`: IBV_ACCESS_* flags, as for `memory_region`.
    template <typename MutableBufferSequence>
    requires boost::asio::is_mutable_buffer_sequence<MutableBufferSequence>::value
    buffer_registration(ibv_pd* pd, const MutableBufferSequence& buffers, int access = IBV_ACCESS_LOCAL_WRITE) {
        const auto first = boost::asio::buffer_sequence_begin(buffers);
        const auto last = boost::asio::buffer_sequence_end(buffers);
        reserve(static_cast<std::size_t>(std::distance(first, last)));
        for (auto i = first; i != last; ++i) {
            const boost::asio::mutable_buffer b(*i);
            add(pd, std::span(static_cast<std::byte*>(b.data()), b.size()), access);
        }
    }
    buffer_registration(buffer_registration&&) noexcept = default;
    buffer_registration& operator=(buffer_registration&&) noexcept = default;
    buffer_registration(const buffer_registration&) = delete;
    buffer_registration& operator=(const buffer_registration&) = delete;
    ~buffer_registration() = default;

    std::size_t size() const noexcept { return buffers_.size(); }
    const_iterator begin() const noexcept { return buffers_.begin(); }
    const_iterator end() const noexcept { return buffers_.end(); }
    const_iterator cbegin() const noexcept { return buffers_.cbegin(); }
    const_iterator cend() const noexcept { return buffers_.cend(); }
    /// The i-th buffer, registered (i < size()): its keys, `buffer(b, n)`, `b + n`,
    /// `to_remote(b)`.
    const mutable_registered_buffer& operator[](std::size_t i) const noexcept { return buffers_[i]; }
    /// The region the i-th buffer is registered as (its `ibv_mr`).
    const memory_region& region(std::size_t i) const noexcept { return regions_[i]; }

private:
    void reserve(std::size_t n);
    void add(ibv_pd* pd, std::span<std::byte> b, int access);

    std::vector<memory_region> regions_;
    std::vector<mutable_registered_buffer> buffers_;
};

/// `buffer_registration(pd, buffers, access)`, as Asio's `register_buffers`. For a peer's
/// RDMA write or read of them, `access` must allow it (IBV_ACCESS_REMOTE_WRITE / _READ).
template <typename MutableBufferSequence>
requires boost::asio::is_mutable_buffer_sequence<MutableBufferSequence>::value buffer_registration
register_buffers(ibv_pd* pd, const MutableBufferSequence& buffers, int access = IBV_ACCESS_LOCAL_WRITE) {
    return buffer_registration(pd, buffers, access);
}

} // namespace rdmacm
