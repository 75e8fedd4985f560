#pragma once
/// @file
/// `rdmacm::connection_request`: what a listener's async_get_request yields.
#include "rdmacm/cm_id.hpp"
#include "rdmacm/event.hpp"

namespace rdmacm {

/// A peer's connection request: the new id (not yet connected: create its queue pair,
/// then `id.async_accept(...)` or `id.reject(...)`) and the CONNECT_REQUEST event (the
/// peer's private data and connection parameters). Dropping the id without accepting
/// rejects the request.
struct connection_request {
    cm_id id;
    cm_event event;
};

} // namespace rdmacm
