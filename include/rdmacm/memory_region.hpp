#pragma once
/// @file
/// `rdmacm::memory_region`: a buffer registered with an RDMA device.
#include "rdmacm/error.hpp"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

namespace rdmacm {

/// Memory registered with a protection domain (`ibv_reg_mr`), deregistered by the
/// destructor. The buffer is the caller's and must outlive the region; the data operations
/// of `queue_pair` take their buffers from it. Move-only; thread safety as for a plain value.
///
/// A region on a queue pair's `pd()` (librdmacm's protection domain of the device) must go
/// before the last id on that device is destroyed: librdmacm deallocates the domain with
/// that id, which fails while a region still uses it, and the domain then leaks.
class memory_region {
public:
    /// Registers `buffer` with `pd` (e.g. `queue_pair::pd()`). `access`: IBV_ACCESS_* flags;
    /// a peer's RDMA write or read needs IBV_ACCESS_REMOTE_WRITE / _READ. Throws
    /// system_error ("ibv_reg_mr") on failure.
    memory_region(ibv_pd* pd, std::span<std::byte> buffer, int access = IBV_ACCESS_LOCAL_WRITE);
    memory_region(memory_region&& other) noexcept;
    memory_region& operator=(memory_region&& other) noexcept;
    ~memory_region();

    ibv_mr* native_handle() const noexcept { return mr_; }
    std::uint32_t lkey() const noexcept { return lkey_; }
    /// The key a peer uses to write or read this region (see `remote_buffer()`).
    std::uint32_t rkey() const noexcept { return rkey_; }
    /// Deregisters it now (`ibv_dereg_mr`); the keys stay what they were, no longer valid.
    /// Idempotent; the destructor does it.
    void reset() noexcept;
    std::span<std::byte> buffer() const noexcept { return buffer_; }
    /// Does `part` lie inside the region?
    bool contains(std::span<const std::byte> part) const noexcept {
        return part.data() >= buffer_.data() && part.data() + part.size() <= buffer_.data() + buffer_.size();
    }

private:
    ibv_mr* mr_;
    std::span<std::byte> buffer_;
    std::uint32_t lkey_ = 0, rkey_ = 0; // read without mr_: reset() may run on another thread
};

/// A peer's registered memory, as it told us: the target of an RDMA write or read.
struct remote_buffer {
    std::uint64_t address = 0;
    std::uint32_t rkey = 0;
    std::uint32_t length = 0;
};

namespace detail {
// A length beyond 2^32 - 1 (more than one work request moves anyway) is clamped, not wrapped.
inline remote_buffer remote_of(const void* data, std::size_t size, std::uint32_t rkey) noexcept {
    return {reinterpret_cast<std::uintptr_t>(data), rkey,
            static_cast<std::uint32_t>(std::min<std::size_t>(size, UINT32_MAX))};
}
} // namespace detail

/// The description of `part` of `mr` a peer needs to write or read it (its access flags
/// must allow that: IBV_ACCESS_REMOTE_WRITE / _READ).
inline remote_buffer to_remote(const memory_region& mr, std::span<const std::byte> part) noexcept {
    return detail::remote_of(part.data(), part.size(), mr.rkey());
}

} // namespace rdmacm
