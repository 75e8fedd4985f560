#pragma once
// An error_code for a failed librdmacm/libibverbs call: errno in system_category, with
// the call's name as the error's source location (ec.location().function_name(), and so
// ec.what(), say e.g. "rdma_resolve_addr").
#include <boost/assert/source_location.hpp>
#include <boost/system/error_code.hpp>

#include <cerrno>

// The error of the librdmacm call just made, which reported it through errno.
#define RDMACM_CALL_ERROR(call_name)                                                                     \
    ([](int e) {                                                                                         \
        static constexpr ::boost::source_location loc(__FILE__, __LINE__, call_name);                   \
        return ::boost::system::error_code(e, ::boost::system::system_category(), &loc);               \
    }(errno))
