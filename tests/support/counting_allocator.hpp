#pragma once
// An allocator that counts what it hands out and gets back (on any thread): bound to a
// handler, it shows each allocation an operation or an erasure makes.
#include <atomic>
#include <cstddef>
#include <memory>

namespace rdmacm::test {

struct allocation_count {
    std::atomic<std::size_t> allocations{0}, deallocations{0};
};

template <typename T>
struct counting_allocator {
    using value_type = T;
    allocation_count* count;
    explicit counting_allocator(allocation_count* c) noexcept : count(c) {}
    template <typename U>
    counting_allocator(const counting_allocator<U>& other) noexcept : count(other.count) {} // NOLINT
    T* allocate(std::size_t n) {
        ++count->allocations;
        return std::allocator<T>().allocate(n);
    }
    void deallocate(T* p, std::size_t n) noexcept {
        ++count->deallocations;
        std::allocator<T>().deallocate(p, n);
    }
    template <typename U>
    bool operator==(const counting_allocator<U>& other) const noexcept {
        return count == other.count;
    }
};

} // namespace rdmacm::test
