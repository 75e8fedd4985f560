#pragma once
// What the public headers do with an id's shared state (id_impl, compiled in src/): its
// mutex, queues and migration machinery stay out of what users include.
#include "rdmacm/detail/completion_handler.hpp"
#include "rdmacm/detail/id_machine.hpp"
#include "rdmacm/detail/op_call.hpp"
#include "rdmacm/event.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <variant>

namespace rdmacm {
struct connection_request;
}

namespace rdmacm::detail {

class id_impl;
class channel_impl;

namespace id_ops {
using void_handler = completion_handler<void(error_code)>;
using event_handler = completion_handler<void(error_code, cm_event)>;
using request_handler = completion_handler<void(error_code, connection_request)>;
using any_handler = std::variant<std::monostate, void_handler, event_handler, request_handler>;

// A copy: a migration changes it.
boost::asio::any_io_executor executor(const id_impl& id) noexcept;
// Null once the id is closed.
rdma_cm_id* native(const id_impl& id) noexcept;
void cancel(id_impl& id) noexcept;
void close(id_impl& id) noexcept;
// Closes `id`; `h` completes once it is destroyed (with no id, at once on `ex`).
void close_when_destroyed(const std::shared_ptr<id_impl>& id, const boost::asio::any_io_executor& ex, void_handler h);

// Starts an operation of `kind` on `id` (`call`: the librdmacm call that starts it, none
// for waits); with no id, `h` completes with errc::not_open on `ex`.
void start(const std::shared_ptr<id_impl>& id, const boost::asio::any_io_executor& ex, op_kind kind, any_handler h,
           const op_call& call);
// Moves `id` to `target`, its handlers then on `target_ex`; with no id `h` completes on
// `ex` with errc::not_open, with no target with errc::channel_closed.
void migrate(const std::shared_ptr<id_impl>& id, const boost::asio::any_io_executor& ex,
             const std::shared_ptr<channel_impl>& target, const boost::asio::any_io_executor& target_ex,
             void_handler h);
// To the channel of `target_ex`'s execution context (made if it has none); errors as
// migrate's, and those of making that channel, on `ex`.
void migrate_to_context(const std::shared_ptr<id_impl>& id, const boost::asio::any_io_executor& ex,
                        const boost::asio::any_io_executor& target_ex, void_handler h);
// Puts `id` in synchronous mode (its executor stays); with no id, errc::not_open on `ex`.
void migrate_to_synchronous(const std::shared_ptr<id_impl>& id, const boost::asio::any_io_executor& ex, void_handler h);
} // namespace id_ops

} // namespace rdmacm::detail
