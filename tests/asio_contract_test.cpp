// The Asio contract, the same for every asynchronous operation, on the kernel CM: for each
// operation, every completion-token style (callback, deferred, use_future, as_tuple with
// use_awaitable), bind_executor(strand), bind_allocator and bind_cancellation_slot. A
// handler is called exactly once, never inside the initiating call, on its associated
// executor; the operation's memory comes from the handler's allocator and is all given back;
// each cancellation type does what the operation's documentation says.
#include "support/connection_pair.hpp"
#include "support/fixture.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/system/system_error.hpp>

#include <deque>
#include <functional>
#include <memory>

using namespace rdmacm;
using namespace rdmacm::test;
using asio::awaitable;
using asio::use_awaitable;

namespace {

// What a handler saw, shared by its copies: exactly-once is checked on these counts.
struct handler_record {
    int calls = 0;
    bool inline_call = false;
    bool on_strand = true;
    error_code ec;
};

// A handler (as Beast's exactly-once helper): records each call and the first argument, and
// whether it ran inside the initiating call (`initiating` is set around it).
struct recording_handler {
    std::shared_ptr<handler_record> record;
    const bool* initiating;
    template <typename... Args>
    void operator()(error_code ec, Args&&...) const {
        ++record->calls;
        record->inline_call = record->inline_call || *initiating;
        record->ec = ec;
    }
};

// An allocator that counts what it hands out and gets back.
struct allocation_count {
    std::size_t allocations = 0, deallocations = 0;
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

// How an operation ends when asked to stop, per cancellation type (its documentation).
struct cancellation_contract {
    bool terminal, partial, total; // true: ends with operation_aborted; false: ignored
};

// Runs the contract over `start` for every token style. `start` takes a completion token and
// returns what the initiating function returns; `complete()` makes the operation complete
// (nothing for operations the kernel answers by itself); `expected` the error when it is not
// cancelled.
template <typename Start, typename Complete>
void check_contract(asio::io_context& ctx, const char* name, Start start, Complete complete, error_code expected,
                    cancellation_contract cancel_contract) {
    BOOST_TEST_CONTEXT(name) {
        bool initiating = false;
        auto run_one = [&](auto token, const char* style) -> std::shared_ptr<handler_record> {
            auto record = std::make_shared<handler_record>();
            BOOST_TEST_CONTEXT(style) {
                initiating = true;
                start(token(recording_handler{record, &initiating}));
                initiating = false;
                complete();
                BOOST_TEST(run_until(
                    ctx, [&] { return record->calls > 0; }, 10s));
                ctx.poll(); // a second call would come now
                ctx.restart();
                BOOST_TEST(record->calls == 1);
                BOOST_TEST(!record->inline_call);
            }
            return record;
        };

        // A plain callback, and one through deferred.
        auto plain = run_one([](auto h) { return h; }, "callback");
        BOOST_TEST((plain->ec == expected), plain->ec.message());
        {
            auto record = std::make_shared<handler_record>();
            auto op = start(asio::deferred);
            initiating = true;
            std::move(op)(recording_handler{record, &initiating});
            initiating = false;
            complete();
            BOOST_TEST_CONTEXT("deferred") {
                BOOST_TEST(run_until(
                    ctx, [&] { return record->calls > 0; }, 10s));
                ctx.poll();
                ctx.restart();
                BOOST_TEST(record->calls == 1);
                BOOST_TEST(!record->inline_call);
                BOOST_TEST((record->ec == expected), record->ec.message());
            }
        }

        // bind_executor: runs on the strand.
        auto strand = asio::make_strand(ctx);
        auto on_strand = run_one(
            [&](auto h) {
                return asio::bind_executor(strand, [h, strand](error_code ec, auto&&... args) mutable {
                    h.record->on_strand = strand.running_in_this_thread();
                    h(ec, args...);
                });
            },
            "bind_executor(strand)");
        BOOST_TEST(on_strand->on_strand);

        // bind_allocator: the operation's state comes from the handler's allocator, all of it
        // given back by the time the handler has run.
        allocation_count count;
        run_one([&](auto h) { return asio::bind_allocator(counting_allocator<char>(&count), h); }, "bind_allocator");
        BOOST_TEST(count.allocations > 0u);
        BOOST_TEST(count.allocations == count.deallocations);

        // use_future: the future gets the outcome (an error would be thrown by get()).
        // (as_tuple(use_future) does not compile on Boost 1.81: its use_future has no initiate.)
        {
            initiating = true;
            auto f = start(asio::use_future);
            initiating = false;
            complete();
            BOOST_TEST_CONTEXT("use_future") {
                BOOST_TEST(run_until(
                    ctx, [&] { return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }, 10s));
                error_code ec;
                try {
                    f.get();
                } catch (const boost::system::system_error& e) {
                    ec = e.code();
                }
                BOOST_TEST((ec == expected), ec.message());
            }
        }

        // as_tuple(use_awaitable), in a coroutine.
        BOOST_TEST_CONTEXT("as_tuple(use_awaitable)") {
            error_code got;
            run(
                ctx,
                [&]() -> awaitable<void> {
                    auto op = start(asio::as_tuple(use_awaitable));
                    asio::post(ctx, complete); // runs once the co_await below has initiated the operation
                    got = std::get<0>(co_await std::move(op));
                }(),
                10s);
            BOOST_TEST((got == expected), got.message());
        }

        // Each cancellation type, emitted once the operation has started; terminal last (it
        // may leave the object good only for closing: a queue pair).
        for (auto [type, aborts] : {std::pair{asio::cancellation_type::partial, cancel_contract.partial},
                                    std::pair{asio::cancellation_type::total, cancel_contract.total},
                                    std::pair{asio::cancellation_type::terminal, cancel_contract.terminal}}) {
            BOOST_TEST_CONTEXT("cancellation type " << static_cast<int>(type)) {
                asio::cancellation_signal signal;
                auto record = std::make_shared<handler_record>();
                initiating = true;
                start(asio::bind_cancellation_slot(signal.slot(), recording_handler{record, &initiating}));
                initiating = false;
                signal.emit(type);
                if (!aborts) complete();
                BOOST_TEST(run_until(
                    ctx, [&] { return record->calls > 0; }, 10s));
                ctx.poll();
                ctx.restart();
                BOOST_TEST(record->calls == 1);
                BOOST_TEST(!record->inline_call);
                error_code want = aborts ? error_code(asio::error::operation_aborted) : expected;
                BOOST_TEST((record->ec == want), record->ec.message());
            }
        }
    }
}

} // namespace

// Waits: every cancellation type ends them, nothing lost.
BOOST_FIXTURE_TEST_CASE(waits, channel_fixture) {
    auto l = make_listener(*channel);
    std::deque<cm_id> ids; // a fresh one per operation
    // An event no operation consumes: the answer to a call made on the raw id.
    check_contract(
        ctx, "cm_id::async_next_event",
        [&](auto token) { return ids.emplace_back(*channel).async_next_event(std::move(token)); },
        [&] {
            endpoint to = device_endpoint();
            BOOST_REQUIRE(rdma_resolve_addr(ids.back().native_handle(), nullptr, to.data(), 2000) == 0);
        },
        {}, {true, true, true});
    // A connection request (dropped by the handler: rejected).
    check_contract(
        ctx, "listener::async_get_request", [&](auto token) { return l.async_get_request(std::move(token)); },
        [&] { async_connect(ids.emplace_back(*channel), l.local_endpoint(), with_qp(), [](error_code, cm_event) {}); },
        {}, {true, true, true});
}

// CM operations: terminal cancellation abandons the kernel's work; the others are ignored.
BOOST_FIXTURE_TEST_CASE(cm_operations, channel_fixture) {
    std::deque<cm_id> ids;
    check_contract(
        ctx, "cm_id::async_resolve_address",
        [&](auto token) {
            return ids.emplace_back(*channel).async_resolve_address(device_endpoint(), 2s, std::move(token));
        },
        [] {}, {}, {true, false, false});
}

// A queue pair's receive (terminal: the queue pair goes to error) and a migration (none).
BOOST_FIXTURE_TEST_CASE(data_path_and_migration, channel_fixture) {
    auto l = make_listener(*channel);
    connection_pair p;
    run(ctx, connect_pair(l, *channel, p));
    event_channel other(ctx);
    bool here = true;
    check_contract(
        ctx, "cm_id::async_migrate",
        [&](auto token) {
            here = !here;
            return p.server->async_migrate(here ? *channel : other, std::move(token));
        },
        [] {}, {}, {false, false, false});

    std::vector<std::byte> cbuf(16), sbuf(16);
    memory_region cmr(p.client_qp->pd(), cbuf), smr(p.server_qp->pd(), sbuf);
    check_contract(
        ctx, "queue_pair::async_receive",
        [&](auto token) { return p.server_qp->async_receive(smr, sbuf, std::move(token)); },
        [&] { p.client_qp->async_send(cmr, cbuf, [](error_code, std::size_t) {}); }, {}, {true, false, false});
}
