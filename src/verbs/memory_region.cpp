#include "rdmacm/buffer_registration.hpp"
#include "rdmacm/detail/call_error.hpp"
#include "rdmacm/memory_region.hpp"

#include <boost/asio/error.hpp>
#include <boost/system/system_error.hpp>

#include <utility>

namespace rdmacm {

memory_region::memory_region(ibv_pd* pd, std::span<std::byte> buffer, int access)
    : mr_(pd ? ibv_reg_mr(pd, buffer.data(), buffer.size(), access) : nullptr), buffer_(buffer) {
    if (!pd) // (libibverbs would read through it)
        throw boost::system::system_error(boost::asio::error::invalid_argument,
                                          "memory_region: no protection domain (a closed queue pair's pd() is null)");
    if (!mr_) throw boost::system::system_error(RDMACM_CALL_ERROR("ibv_reg_mr"));
    lkey_ = mr_->lkey;
    rkey_ = mr_->rkey;
}

memory_region::memory_region(memory_region&& other) noexcept
    : mr_(std::exchange(other.mr_, nullptr)), buffer_(std::exchange(other.buffer_, {})),
      lkey_(std::exchange(other.lkey_, 0)), rkey_(std::exchange(other.rkey_, 0)) {}

memory_region& memory_region::operator=(memory_region&& other) noexcept {
    if (this != &other) {
        reset();
        mr_ = std::exchange(other.mr_, nullptr);
        buffer_ = std::exchange(other.buffer_, {});
        lkey_ = std::exchange(other.lkey_, 0);
        rkey_ = std::exchange(other.rkey_, 0);
    }
    return *this;
}

void memory_region::reset() noexcept {
    if (mr_) ibv_dereg_mr(std::exchange(mr_, nullptr));
}

memory_region::~memory_region() { reset(); }

void buffer_registration::reserve(std::size_t n) {
    regions_.reserve(n);
    buffers_.reserve(n);
}

// Within what reserve() made room for: a region either registers or is not added, and its
// buffer's push_back does not throw.
void buffer_registration::add(ibv_pd* pd, std::span<std::byte> b, int access) {
    buffers_.push_back(buffer(regions_.emplace_back(pd, b, access)));
}

} // namespace rdmacm
