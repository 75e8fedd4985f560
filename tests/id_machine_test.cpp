// The per-id bookkeeping without I/O: which operation each event completes, what a
// cancelled operation leaves behind, and the refusals users rely on.
#include <rdmacm/detail/id_machine.hpp>

#include <boost/test/unit_test.hpp>

using namespace rdmacm;
using namespace rdmacm::detail;
using action = id_machine::action;

BOOST_AUTO_TEST_CASE(client_lifecycle_completes_each_operation_in_turn) {
    id_machine m;
    BOOST_TEST(!m.start(op_kind::resolve_address));
    auto d = m.on_event(RDMA_CM_EVENT_ADDR_RESOLVED);
    BOOST_TEST((d.what == action::complete && d.kind == op_kind::resolve_address && !d.result));
    m.completed(d.kind);
    BOOST_TEST(!m.start(op_kind::resolve_route));
    d = m.on_event(RDMA_CM_EVENT_ROUTE_RESOLVED);
    BOOST_TEST((d.what == action::complete && d.kind == op_kind::resolve_route));
    m.completed(d.kind);
    BOOST_TEST(!m.start(op_kind::establish));
    d = m.on_event(RDMA_CM_EVENT_ESTABLISHED);
    BOOST_TEST((d.what == action::complete && d.kind == op_kind::establish && !d.result));
    m.completed(d.kind);
    BOOST_TEST(!m.start(op_kind::disconnect));
    d = m.on_event(RDMA_CM_EVENT_DISCONNECTED);
    BOOST_TEST((d.what == action::complete && d.kind == op_kind::disconnect));
}

BOOST_AUTO_TEST_CASE(failure_events_complete_with_their_error) {
    struct {
        rdma_cm_event_type type;
        op_kind kind;
        errc error;
    } cases[] = {
        {RDMA_CM_EVENT_ADDR_ERROR, op_kind::resolve_address, errc::address_error},
        {RDMA_CM_EVENT_ROUTE_ERROR, op_kind::resolve_route, errc::route_error},
        {RDMA_CM_EVENT_REJECTED, op_kind::establish, errc::rejected},
        {RDMA_CM_EVENT_UNREACHABLE, op_kind::establish, errc::unreachable},
        {RDMA_CM_EVENT_CONNECT_ERROR, op_kind::establish, errc::connect_error},
    };
    for (auto c : cases) {
        id_machine m;
        BOOST_TEST(!m.start(c.kind));
        auto d = m.on_event(c.type);
        BOOST_TEST((d.what == action::complete && d.kind == c.kind));
        BOOST_TEST(d.result == make_error_code(c.error), rdma_event_str(c.type));
    }
}

BOOST_AUTO_TEST_CASE(overlapping_operations_of_one_kind_are_refused) {
    id_machine m;
    BOOST_TEST(!m.start(op_kind::establish));
    BOOST_TEST(m.start(op_kind::establish) == make_error_code(errc::operation_in_progress));
    BOOST_TEST(!m.start(op_kind::next_event)); // another kind is fine
}

BOOST_AUTO_TEST_CASE(unsolicited_events_queue_for_next_event_in_order) {
    id_machine m;
    for (auto t : {RDMA_CM_EVENT_DISCONNECTED, RDMA_CM_EVENT_TIMEWAIT_EXIT, RDMA_CM_EVENT_ADDR_CHANGE,
                   RDMA_CM_EVENT_ESTABLISHED}) {
        auto d = m.on_event(t);
        BOOST_TEST((d.what == action::queue && d.kind == op_kind::next_event && !d.result));
    }
    BOOST_TEST(m.disconnected());
    BOOST_TEST(!m.start(op_kind::next_event));
    auto d = m.on_event(RDMA_CM_EVENT_UNREACHABLE); // after ESTABLISHED: delivered, not an error
    BOOST_TEST((d.what == action::complete && d.kind == op_kind::next_event && !d.result));
}

BOOST_AUTO_TEST_CASE(cancelled_connect_drops_its_event_and_blocks_a_new_one_until_then) {
    id_machine m;
    BOOST_TEST(!m.start(op_kind::establish));
    auto gen = m.generation(op_kind::establish);
    BOOST_TEST(m.cancel(op_kind::establish));
    BOOST_TEST(!m.cancel(op_kind::establish));
    BOOST_TEST(m.start(op_kind::establish) == make_error_code(errc::operation_in_progress));
    auto d = m.on_event(RDMA_CM_EVENT_ESTABLISHED);
    BOOST_TEST((d.what == action::drop && d.kind == op_kind::establish));
    BOOST_TEST(!m.start(op_kind::establish));
    BOOST_TEST(m.generation(op_kind::establish) != gen);
}

BOOST_AUTO_TEST_CASE(cancelled_wait_for_events_loses_nothing) {
    id_machine m;
    BOOST_TEST(!m.start(op_kind::next_event));
    BOOST_TEST(m.cancel(op_kind::next_event));
    auto d = m.on_event(RDMA_CM_EVENT_DISCONNECTED);
    BOOST_TEST((d.what == action::queue && d.kind == op_kind::next_event));
    BOOST_TEST(!m.start(op_kind::request));
    BOOST_TEST(m.cancel(op_kind::request));
    d = m.on_event(RDMA_CM_EVENT_CONNECT_REQUEST);
    BOOST_TEST((d.what == action::queue && d.kind == op_kind::request));
}

BOOST_AUTO_TEST_CASE(failed_call_frees_the_slot_even_when_cancelled_meanwhile) {
    id_machine m;
    BOOST_TEST(!m.start(op_kind::resolve_address));
    BOOST_TEST(m.cancel(op_kind::resolve_address));
    m.call_failed(op_kind::resolve_address);
    BOOST_TEST(!m.start(op_kind::resolve_address));
}

BOOST_AUTO_TEST_CASE(device_removal_fails_everything_else) {
    id_machine m;
    BOOST_TEST(!m.start(op_kind::establish));
    BOOST_TEST(!m.start(op_kind::disconnect));
    BOOST_TEST(!m.start(op_kind::resolve_route));
    BOOST_TEST(m.cancel(op_kind::resolve_route)); // abandoned: its answer will not come now
    auto d = m.on_event(RDMA_CM_EVENT_DEVICE_REMOVAL);
    BOOST_TEST((d.what == action::queue && d.kind == op_kind::next_event && d.connection_lost));
    BOOST_TEST((d.ends(op_kind::establish) && d.ends(op_kind::disconnect) && !d.ends(op_kind::resolve_route)));
    BOOST_TEST(d.others_result == make_error_code(errc::device_removed));
    BOOST_TEST(!m.pending(op_kind::resolve_route));
    // The id is dead: only its remaining events may still be read.
    m.completed(op_kind::establish);
    BOOST_TEST(m.start(op_kind::establish) == make_error_code(errc::device_removed));
    BOOST_TEST(!m.start(op_kind::next_event));
}

// Events a well-behaved CM does not send in that order still end every operation they
// concern: nothing is left waiting for an answer that will never come.
BOOST_AUTO_TEST_CASE(disconnected_while_connecting_fails_the_connect) {
    id_machine m;
    BOOST_TEST(!m.start(op_kind::establish));
    BOOST_TEST(!m.start(op_kind::next_event));
    auto d = m.on_event(RDMA_CM_EVENT_DISCONNECTED);
    BOOST_TEST((d.what == action::complete && d.kind == op_kind::next_event && d.connection_lost));
    BOOST_TEST(d.ends(op_kind::establish));
    BOOST_TEST(d.others_result == make_error_code(errc::disconnected));
}

BOOST_AUTO_TEST_CASE(timewait_exit_without_disconnected_ends_the_connection) {
    id_machine m;
    BOOST_TEST(!m.start(op_kind::disconnect));
    auto d = m.on_event(RDMA_CM_EVENT_TIMEWAIT_EXIT);
    BOOST_TEST((d.what == action::complete && d.kind == op_kind::disconnect && !d.result && d.connection_lost));
    BOOST_TEST(m.disconnected());
    // After a DISCONNECTED, TIMEWAIT_EXIT is just the next event.
    id_machine n;
    n.on_event(RDMA_CM_EVENT_DISCONNECTED);
    d = n.on_event(RDMA_CM_EVENT_TIMEWAIT_EXIT);
    BOOST_TEST((d.what == action::queue && d.kind == op_kind::next_event && !d.connection_lost && d.others == 0));
}

BOOST_AUTO_TEST_CASE(late_answers_after_established_are_only_delivered) {
    id_machine m;
    BOOST_TEST(!m.start(op_kind::establish));
    auto d = m.on_event(RDMA_CM_EVENT_ESTABLISHED);
    m.completed(d.kind);
    for (auto t : {RDMA_CM_EVENT_UNREACHABLE, RDMA_CM_EVENT_CONNECT_ERROR, RDMA_CM_EVENT_REJECTED,
                   RDMA_CM_EVENT_ADDR_RESOLVED, RDMA_CM_EVENT_ROUTE_ERROR}) {
        d = m.on_event(t);
        BOOST_TEST((d.what == action::queue && d.kind == op_kind::next_event && !d.result && d.others == 0),
                   rdma_event_str(t));
    }
    BOOST_TEST(!m.start(op_kind::establish)); // nothing left pending by them
}

BOOST_AUTO_TEST_CASE(closed_id_refuses_every_operation) {
    id_machine m;
    m.close();
    BOOST_TEST(m.start(op_kind::resolve_address) == make_error_code(errc::not_open));
    BOOST_TEST(m.start(op_kind::next_event) == make_error_code(errc::not_open));
}

// Review D6: rdma_connect on an id with no device crashes inside librdmacm.
BOOST_AUTO_TEST_CASE(a_connect_needs_a_device) {
    id_machine m;
    BOOST_TEST(m.start(op_kind::establish, false) == make_error_code(errc::no_device));
    BOOST_TEST(!m.pending(op_kind::establish), "a refused start leaves nothing outstanding");
    BOOST_TEST(!m.start(op_kind::resolve_address, false)); // what gives it one
    BOOST_TEST(!m.start(op_kind::establish, true));
}

BOOST_AUTO_TEST_CASE(errors_have_messages_and_portable_conditions) {
    error_code ec = errc::rejected;
    BOOST_TEST(ec.category().name() == std::string("asio-rdmacm"));
    BOOST_TEST(ec.message().find("REJECTED") != std::string::npos);
    BOOST_TEST(ec == boost::system::errc::connection_refused);
    BOOST_TEST(error_code(errc::unreachable) == boost::system::errc::host_unreachable);
}
