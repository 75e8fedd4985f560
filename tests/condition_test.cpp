// rdmacm::condition: one question asked of any error, whichever category it came in (no
// device needed: the codes are made here as the library makes them).
#include <rdmacm/error.hpp>

#include <boost/test/unit_test.hpp>

#include <infiniband/verbs.h>

#include <cerrno>

using rdmacm::condition;
using rdmacm::errc;
using rdmacm::error_code;

namespace {
error_code wc(int status) { return {status, rdmacm::work_completion_category()}; }
error_code sys(int e) { return {e, boost::system::system_category()}; }
} // namespace

BOOST_AUTO_TEST_CASE(the_connection_is_gone_whichever_way_it_is_told) {
    BOOST_TEST((make_error_code(errc::disconnected) == condition::connection_lost));
    BOOST_TEST((make_error_code(errc::device_removed) == condition::connection_lost));
    BOOST_TEST((wc(IBV_WC_WR_FLUSH_ERR) == condition::connection_lost));
    BOOST_TEST((wc(IBV_WC_RETRY_EXC_ERR) == condition::connection_lost));
    BOOST_TEST((wc(IBV_WC_RNR_RETRY_EXC_ERR) == condition::connection_lost));
    BOOST_TEST((make_error_code(errc::rejected) != condition::connection_lost));
    BOOST_TEST((wc(IBV_WC_REM_ACCESS_ERR) != condition::connection_lost));
    BOOST_TEST((error_code() != condition::connection_lost));
}

BOOST_AUTO_TEST_CASE(refused_on_ib_and_on_iwarp_alike) {
    BOOST_TEST((make_error_code(errc::rejected) == condition::refused)); // rxe: a REJECTED event
    BOOST_TEST((sys(ECONNREFUSED) == condition::refused));               // siw: rdma_connect fails
    BOOST_TEST((make_error_code(errc::disconnected) != condition::refused));
}

BOOST_AUTO_TEST_CASE(timed_out) {
    BOOST_TEST((make_error_code(errc::unreachable) == condition::timed_out));
    BOOST_TEST((sys(ETIMEDOUT) == condition::timed_out));
    BOOST_TEST((wc(IBV_WC_RETRY_EXC_ERR) == condition::timed_out));
    BOOST_TEST((wc(IBV_WC_WR_FLUSH_ERR) != condition::timed_out));
}

BOOST_AUTO_TEST_CASE(misuse_is_every_refusal_before_a_call) {
    for (auto e : {errc::operation_in_progress, errc::not_open, errc::private_data_too_long, errc::no_device})
        BOOST_TEST((make_error_code(e) == condition::misuse), make_error_code(e).message());
    for (auto e : {errc::address_error, errc::rejected, errc::unexpected_event})
        BOOST_TEST((make_error_code(e) != condition::misuse), make_error_code(e).message());
    BOOST_TEST((sys(EINVAL) != condition::misuse));
}

BOOST_AUTO_TEST_CASE(a_condition_reads) {
    const boost::system::error_condition c = condition::connection_lost;
    BOOST_TEST(c.message() == "the connection is gone");
    BOOST_TEST(std::string(c.category().name()) == "asio-rdmacm.condition");
}
