// detail::completion_handler without a device: a move assignment moves (Boost 1.81's
// any_completion_handler wraps itself without end there), and the erased handler keeps
// what it is associated with — its executor, allocator and cancellation slot.
#include "rdmacm/detail/completion_handler.hpp"
#include "support/counting_allocator.hpp"

#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <memory>
#include <utility>

using rdmacm::detail::completion_handler;
using handler = completion_handler<void(int)>;

namespace {
// Counts its calls, and its own destruction (a moved-from one counts nothing).
struct counted {
    std::shared_ptr<int> calls, destroyed;
    std::unique_ptr<int> alive = std::make_unique<int>();
    counted(std::shared_ptr<int> c, std::shared_ptr<int> d) : calls(std::move(c)), destroyed(std::move(d)) {}
    counted(counted&&) = default;
    ~counted() {
        if (alive) ++*destroyed;
    }
    void operator()(int v) { *calls += v; }
};
} // namespace

BOOST_AUTO_TEST_CASE(a_move_assignment_moves_the_handler_and_destroys_the_one_it_replaces) {
    auto calls = std::make_shared<int>(0), destroyed = std::make_shared<int>(0);
    handler a(counted(calls, destroyed)), b(counted(calls, destroyed));
    a = std::move(b);            // (1.81's base: unbounded recursion here)
    BOOST_TEST(*destroyed == 1); // a's first handler
    BOOST_TEST(!b);
    BOOST_REQUIRE(static_cast<bool>(a));
    std::move(a)(5);
    BOOST_TEST(*calls == 5);
    BOOST_TEST(*destroyed == 2); // the called one, once it ran
    BOOST_TEST(!a);
    a = nullptr;
    handler c = std::exchange(a, nullptr);
    BOOST_TEST(!c);
}

BOOST_AUTO_TEST_CASE(an_erased_handler_is_taken_over_and_moved_without_being_erased_again) {
    auto calls = std::make_shared<int>(0), destroyed = std::make_shared<int>(0);
    rdmacm::test::allocation_count allocations;
    boost::asio::any_completion_handler<void(int)> erased(
        boost::asio::bind_allocator(rdmacm::test::counting_allocator<void>(&allocations), counted(calls, destroyed)));
    BOOST_TEST(allocations.allocations == 1u);
    handler h(std::move(erased)); // (wrapped, or moved by wrapping, it would be erased again: counted)
    BOOST_TEST(allocations.allocations == 1u);
    BOOST_TEST(!erased);
    handler moved;
    moved = std::move(h);
    BOOST_TEST(allocations.allocations == 1u);
    std::move(moved)(2);
    BOOST_TEST(*calls == 2);
}

BOOST_AUTO_TEST_CASE(the_erased_handler_keeps_its_executor_and_cancellation_slot) {
    boost::asio::io_context ctx;
    boost::asio::cancellation_signal cancel;
    auto calls = std::make_shared<int>(0), destroyed = std::make_shared<int>(0);
    handler h(boost::asio::bind_cancellation_slot(
        cancel.slot(), boost::asio::bind_executor(ctx.get_executor(), counted(calls, destroyed))));
    handler moved;
    moved = std::move(h);
    auto ex = boost::asio::get_associated_executor(moved, boost::asio::any_completion_executor());
    BOOST_REQUIRE(ex);
    BOOST_TEST((ex == boost::asio::any_completion_executor(ctx.get_executor())));
    // (Reached through the erased handler's own state: a cancellation signalled comes through.)
    auto slot = moved.get_cancellation_slot();
    BOOST_REQUIRE(slot.is_connected());
    bool cancelled = false;
    slot.assign([&](boost::asio::cancellation_type) { cancelled = true; });
    cancel.emit(boost::asio::cancellation_type::terminal);
    BOOST_TEST(cancelled);
    // Without an executor of its own: the candidate.
    handler plain(counted(calls, destroyed));
    BOOST_TEST(!boost::asio::get_associated_executor(plain, boost::asio::any_completion_executor()));
}
