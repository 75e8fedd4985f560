// The one Boost.Test main every test executable links.
#define BOOST_TEST_MODULE asio - rdmacm
#include <boost/test/tree/observer.hpp>
#include <boost/test/tree/test_unit.hpp>
#include <boost/test/unit_test.hpp>

#include <iostream>

namespace {

// Each test case's name on stderr as it starts: a test killed by its time-out (ctest's, which
// keeps what was written but not what sat in stdout's buffer) still names the case it hung in.
struct name_each_case : boost::unit_test::test_observer {
    void test_unit_start(const boost::unit_test::test_unit& tu) override {
        if (tu.p_type == boost::unit_test::TUT_CASE) std::cerr << "test case: " << tu.full_name() << std::endl;
    }
};

struct observe {
    name_each_case observer;
    observe() { boost::unit_test::framework::register_observer(observer); }
    ~observe() { boost::unit_test::framework::deregister_observer(observer); }
};

} // namespace

BOOST_TEST_GLOBAL_FIXTURE(observe);
