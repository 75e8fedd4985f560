#pragma once
// The samples' I/O objects whose operations complete into a coroutine without a token
// (`co_await qp.async_send(mr, message)`): use_awaitable is their executor's default token
// (as_default_on). A plain object converts into one by a move.
#include <rdmacm/rdmacm.hpp>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace sample {

using awaitable_id = boost::asio::use_awaitable_t<>::as_default_on_t<rdmacm::cm_id>;
using awaitable_queue_pair = boost::asio::use_awaitable_t<>::as_default_on_t<rdmacm::queue_pair>;
using awaitable_receive_pool = boost::asio::use_awaitable_t<>::as_default_on_t<rdmacm::receive_pool>;
using awaitable_shard_pool = boost::asio::use_awaitable_t<>::as_default_on_t<rdmacm::shard_pool>;
using awaitable_timer = boost::asio::use_awaitable_t<>::as_default_on_t<boost::asio::steady_timer>;

} // namespace sample
