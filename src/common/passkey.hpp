#pragma once
// An argument only `T` can make: `T`'s constructor is public (std::make_shared needs it,
// one allocation for the object and its count) yet callable by `T` alone.
namespace rdmacm::detail {

template <typename T>
class passkey {
    friend T;
    passkey() = default;
};

} // namespace rdmacm::detail
