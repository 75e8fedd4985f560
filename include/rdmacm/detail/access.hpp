#pragma once
// The library's way into the shared state behind its I/O objects (each befriends this), kept
// out of their public interfaces.
#include <utility>

namespace rdmacm::detail {

struct access {
    // The object's shared state (a shared_ptr to its *_impl; null when closed).
    template <typename T>
    static decltype(auto) impl(const T& object) noexcept {
        return (object.impl_);
    }
    // An object made by the library from its shared state (a connection request's id, a
    // received message): constructors users do not see.
    template <typename T, typename... Args>
    static T make(Args&&... args) {
        return T(std::forward<Args>(args)...);
    }
    // A pooled connection's place in its pool.
    template <typename T>
    static decltype(auto) state(const T& object) noexcept {
        return (object.state_);
    }
};

} // namespace rdmacm::detail
