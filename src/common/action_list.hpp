#pragma once
// The answer of a sans-io machine's course: up to N actions, in the order they are taken
// (move_machine.hpp, pool_machine.hpp). A literal type, so that the code that follows a
// course can pin it with static_asserts.
#include <array>
#include <cstddef>
#include <cstdint>

namespace rdmacm::detail {

template <typename Action, std::size_t N>
struct action_list {
    std::array<Action, N> list{};
    std::uint8_t size = 0;
    constexpr const Action* begin() const noexcept { return list.data(); }
    constexpr const Action* end() const noexcept { return list.data() + size; }
};

} // namespace rdmacm::detail
