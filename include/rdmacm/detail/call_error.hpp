#pragma once
// An error_code for a failed librdmacm/libibverbs call: errno in system_category, with
// the call's name as the error's source location (ec.location().function_name(), and so
// ec.what(), say e.g. "rdma_resolve_addr").
#include <boost/assert/source_location.hpp>
#include <boost/system/error_code.hpp>

#include <cerrno>

// The error `e` (an errno value) of the call named `call_name`. The location's file is the
// source file's name alone (__FILE_NAME__): ec.what() must not show where the library was
// built.
#define RDMACM_CALL_ERRNO(call_name, e)                                                                                \
    ([](int code) {                                                                                                    \
        static constexpr ::boost::source_location loc(__FILE_NAME__, __LINE__, call_name);                             \
        return ::boost::system::error_code(code, ::boost::system::system_category(), &loc);                            \
    }(e))

// The error of the librdmacm call just made, which reported it through errno.
#define RDMACM_CALL_ERROR(call_name) RDMACM_CALL_ERRNO(call_name, errno)
