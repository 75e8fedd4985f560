#pragma once
/// @file
/// All of asio-rdmacm.
#include "rdmacm/cm_id.hpp"
#include "rdmacm/conn_params.hpp"
#include "rdmacm/connect.hpp"
#include "rdmacm/connection_request.hpp"
#include "rdmacm/endpoint.hpp"
#include "rdmacm/error.hpp"
#include "rdmacm/event.hpp"
#include "rdmacm/event_channel.hpp"
#include "rdmacm/listener.hpp"
#include "rdmacm/memory_region.hpp"
#include "rdmacm/qp_attr.hpp"
#include "rdmacm/queue_pair.hpp"
