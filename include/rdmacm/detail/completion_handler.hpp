#pragma once
// The type-erased handler the compiled core holds: Asio's any_completion_handler with a
// move assignment that moves. Boost 1.81's builds `any_completion_handler(other)` from the
// lvalue `other`, which its unconstrained forwarding constructor wraps again, without end
// (chriskohlhoff/asio#1180); its move constructor, swap and `= nullptr` are sound. (Made
// into the base again, it would be wrapped, as any handler is: moved as the base,
// `static_cast<base&&>(h)`, it is not. Nothing in the library does either.)
#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/associated_executor.hpp>

#include <type_traits>
#include <utility>

namespace rdmacm::detail {

template <typename... Signatures>
class completion_handler : public boost::asio::any_completion_handler<Signatures...> {
    using base = boost::asio::any_completion_handler<Signatures...>;

public:
    constexpr completion_handler() noexcept = default;
    constexpr completion_handler(std::nullptr_t) noexcept {}
    // Takes over an erased handler as it is (not wrapped in another).
    completion_handler(base&& h) noexcept : base(std::move(h)) {}
    // Erases any other handler.
    template <typename H, typename = std::enable_if_t<!std::is_base_of_v<base, std::decay_t<H>>>>
    completion_handler(H&& h) : base(std::forward<H>(h)) {}

    completion_handler(completion_handler&&) noexcept = default;
    completion_handler& operator=(completion_handler&& other) noexcept {
        base(static_cast<base&&>(other)).swap(*this);
        return *this;
    }
    completion_handler& operator=(std::nullptr_t) noexcept {
        base().swap(*this);
        return *this;
    }
};

template <typename T>
inline constexpr bool is_any_completion_handler = false;
template <typename... Signatures>
inline constexpr bool is_any_completion_handler<boost::asio::any_completion_handler<Signatures...>> = true;
template <typename... Signatures>
inline constexpr bool is_any_completion_handler<completion_handler<Signatures...>> = true;

} // namespace rdmacm::detail

// Boost 1.81 gives the erased handler's own executor for the base type only; a derived one
// would be answered with the candidate (its allocator and cancellation slot are members, and
// found as they are).
template <typename... Signatures, typename Candidate>
struct boost::asio::associated_executor<rdmacm::detail::completion_handler<Signatures...>, Candidate>
    : boost::asio::associated_executor<boost::asio::any_completion_handler<Signatures...>, Candidate> {};
