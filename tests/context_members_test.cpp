// A context's register of bound objects (context_bound::state) without a device: members
// join and leave in any order, each by its index (no search: a context with thousands of
// connections pays nothing per id made, moved or destroyed), and removing what is not a
// member (a reader never started) changes nothing.
#include "common/context_bound.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <random>
#include <vector>

using rdmacm::detail::context_bound;

namespace {

struct member final : context_bound {
    void context_shutdown() noexcept override {}
};

// The state's members, as a sorted list, equal `want` (sorted).
void check_members(const context_bound::state& s, std::vector<context_bound*> want) {
    std::vector<context_bound*> got(s.members.begin(), s.members.end());
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    BOOST_TEST(got == want, boost::test_tools::per_element());
}

} // namespace

BOOST_AUTO_TEST_CASE(members_leave_in_any_order) {
    context_bound::state s;
    std::array<member, 5> m;
    for (auto& x : m) s.add(&x);
    s.remove(&m[1]); // from the middle: the last takes its place
    s.remove(&m[4]); // the last, moved
    s.remove(&m[1]); // again: nothing
    check_members(s, {&m[0], &m[2], &m[3]});
    s.remove(&m[0]);
    s.add(&m[1]); // back, at the end
    s.remove(&m[3]);
    check_members(s, {&m[1], &m[2]});
    member stranger; // never added
    s.remove(&stranger);
    check_members(s, {&m[1], &m[2]});
    s.remove(&m[2]);
    s.remove(&m[1]);
    BOOST_TEST(s.members.empty());
}

BOOST_AUTO_TEST_CASE(thousands_join_and_leave_in_random_order) {
    context_bound::state s;
    std::vector<member> m(10'000);
    for (auto& x : m) s.add(&x);
    std::vector<std::size_t> order(m.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937(7));
    // Half leave; the rest are exactly the other half.
    std::vector<context_bound*> staying;
    for (std::size_t k = 0; k < order.size(); ++k) {
        if (k % 2 == 0)
            s.remove(&m[order[k]]);
        else
            staying.push_back(&m[order[k]]);
    }
    check_members(s, staying);
    for (auto* x : staying) s.remove(x);
    BOOST_TEST(s.members.empty());
}
