#pragma once
// The throwing form of a call that has an error_code form.
#include "rdmacm/error.hpp"

#include <boost/system/system_error.hpp>

namespace rdmacm::detail {

// `what`: the member function, before the error's own message and location.
inline void throw_if(const error_code& ec, const char* what) {
    if (ec) throw boost::system::system_error(ec, what);
}

} // namespace rdmacm::detail
