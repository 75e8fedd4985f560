// The one Boost.Test main every test executable links.
#define BOOST_TEST_MODULE asio - rdmacm
#include <boost/test/unit_test.hpp>
