// Built by the "headers" test: what users include only declares the library's shared state
// (its mutexes, queues, descriptors and threads are src/'s). Were one of these classes
// defined by a public header, defining it here would not compile.
#include <rdmacm/rdmacm.hpp>

namespace rdmacm::detail {
class channel_impl {};
class id_impl {};
class qp_impl {};
class receive_pool_impl {};
class pool_impl {};
struct pooled_state {};
} // namespace rdmacm::detail
