#include "rdmacm/error.hpp"

#include <infiniband/verbs.h>

#include <cerrno>
#include <string>

namespace rdmacm {
namespace {

class category final : public boost::system::error_category {
public:
    // A fixed id keeps error_codes comparable across shared-library boundaries.
    constexpr category() noexcept : error_category(0x8e2f'51c3'7a0d'4b19) {}

    const char* name() const noexcept override { return "asio-rdmacm"; }

    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
        case errc::address_error: return "address resolution failed (RDMA_CM_EVENT_ADDR_ERROR)";
        case errc::route_error: return "route resolution failed (RDMA_CM_EVENT_ROUTE_ERROR)";
        case errc::connect_error: return "connection setup failed (RDMA_CM_EVENT_CONNECT_ERROR)";
        case errc::unreachable: return "peer unreachable (RDMA_CM_EVENT_UNREACHABLE)";
        case errc::rejected: return "connection rejected by the peer (RDMA_CM_EVENT_REJECTED)";
        case errc::device_removed: return "RDMA device removed (RDMA_CM_EVENT_DEVICE_REMOVAL)";
        case errc::address_changed: return "address changed (RDMA_CM_EVENT_ADDR_CHANGE)";
        case errc::disconnected: return "disconnected before the operation completed (RDMA_CM_EVENT_DISCONNECTED)";
        case errc::multicast_error: return "multicast join failed (RDMA_CM_EVENT_MULTICAST_ERROR)";
        case errc::unexpected_event: return "CM event the operation cannot have caused";
        case errc::operation_in_progress: return "an operation of this kind is already in progress on this id";
        case errc::not_open: return "the object (CM id, listener, queue pair) is closed or moved-from";
        case errc::already_listening: return "the CM id is already listening";
        case errc::address_family_not_supported: return "address family not supported (IPv4, IPv6 or AF_IB only)";
        case errc::private_data_too_long: return "private data longer than the transport allows";
        case errc::channel_closed: return "the event channel (or its execution context) is gone";
        case errc::listener_cannot_migrate:
            return "a listening id cannot migrate (its pending requests would be lost): migrate it before listen";
        case errc::synchronous_mode:
            return "the CM id is in synchronous mode: use its blocking calls, or migrate it to an event channel";
        case errc::not_synchronous:
            return "blocking CM calls need synchronous mode: enter it first (async_enter_synchronous_mode)";
        case errc::event_pending:
            return "an event of the CM id is queued or expected: it would be taken for the call's own "
                   "(wait for it, or read it with next_event, first)";
        case errc::buffer_not_registered: return "the buffer does not lie inside the memory region given with it";
        case errc::remote_buffer_too_small: return "more data than the peer's remote buffer holds";
        case errc::no_such_shard: return "no such shard in the pool";
        case errc::pool_stopped: return "the shard pool is stopping";
        case errc::too_many_buffers:
            return "more buffers in one operation than the queue pair takes (queue_pair_options::max_send_sge, "
                   "max_recv_sge; an RDMA read: also the device's max_sge_rd)";
        case errc::no_device:
            return "the CM id has no RDMA device yet: resolve an address (or bind to a device's address, or "
                   "take a connection request) first";
        case errc::protocol_error:
            return "the peer does not speak the stream protocol (or speaks another version of it): "
                   "docs/stream-protocol.md";
        }
        return "asio-rdmacm error " + std::to_string(ev);
    }

    boost::system::error_condition default_error_condition(int ev) const noexcept override {
        namespace sc = boost::system::errc;
        switch (static_cast<errc>(ev)) {
        case errc::rejected: return sc::make_error_condition(sc::connection_refused);
        case errc::unreachable: return sc::make_error_condition(sc::host_unreachable);
        case errc::connect_error: return sc::make_error_condition(sc::connection_aborted);
        case errc::device_removed: return sc::make_error_condition(sc::no_such_device);
        case errc::address_family_not_supported: return sc::make_error_condition(sc::address_family_not_supported);
        case errc::private_data_too_long: return sc::make_error_condition(sc::message_size);
        case errc::not_open: return sc::make_error_condition(sc::bad_file_descriptor);
        case errc::protocol_error: return sc::make_error_condition(sc::protocol_error);
        default: return {ev, *this};
        }
    }
};

constexpr category the_category;

class wc_category final : public boost::system::error_category {
public:
    constexpr wc_category() noexcept : error_category(0x8e2f'51c3'7a0d'4b1a) {}

    const char* name() const noexcept override { return "ibv_wc_status"; }

    std::string message(int ev) const override {
        return std::string("work completion failed: ") + ibv_wc_status_str(static_cast<ibv_wc_status>(ev));
    }

    boost::system::error_condition default_error_condition(int ev) const noexcept override {
        namespace sc = boost::system::errc;
        switch (ev) {
        case IBV_WC_WR_FLUSH_ERR: return sc::make_error_condition(sc::operation_canceled);
        case IBV_WC_REM_ACCESS_ERR:
        case IBV_WC_LOC_PROT_ERR:
        case IBV_WC_LOC_ACCESS_ERR: return sc::make_error_condition(sc::permission_denied);
        case IBV_WC_RETRY_EXC_ERR:
        case IBV_WC_RNR_RETRY_EXC_ERR: return sc::make_error_condition(sc::timed_out);
        case IBV_WC_LOC_LEN_ERR:
        case IBV_WC_REM_INV_REQ_ERR: return sc::make_error_condition(sc::invalid_argument);
        default: return {ev, *this};
        }
    }
};

constexpr wc_category the_wc_category;

class condition_category_impl final : public boost::system::error_category {
public:
    constexpr condition_category_impl() noexcept : error_category(0x8e2f'51c3'7a0d'4b1b) {}

    const char* name() const noexcept override { return "asio-rdmacm.condition"; }

    std::string message(int ev) const override {
        switch (static_cast<condition>(ev)) {
        case condition::connection_lost: return "the connection is gone";
        case condition::refused: return "the connection was refused";
        case condition::timed_out: return "nobody answered in time";
        case condition::misuse: return "the library refused the call before making it";
        }
        return "asio-rdmacm condition " + std::to_string(ev);
    }

    bool equivalent(const boost::system::error_code& code, int c) const noexcept override {
        if (code.category() == the_category) return matches(static_cast<errc>(code.value()), static_cast<condition>(c));
        if (code.category() == the_wc_category) return matches_wc(code.value(), static_cast<condition>(c));
        if (code.category() == boost::system::system_category() || code.category() == boost::system::generic_category())
            return (c == static_cast<int>(condition::refused) && code.value() == ECONNREFUSED) ||
                   (c == static_cast<int>(condition::timed_out) && code.value() == ETIMEDOUT);
        return false;
    }

private:
    static bool matches(errc e, condition c) noexcept {
        switch (c) {
        case condition::connection_lost: return e == errc::disconnected || e == errc::device_removed;
        case condition::refused: return e == errc::rejected;
        case condition::timed_out: return e == errc::unreachable;
        case condition::misuse: return e >= errc::operation_in_progress && e <= errc::no_device;
        }
        return false;
    }
    static bool matches_wc(int status, condition c) noexcept {
        const bool retries_exhausted = status == IBV_WC_RETRY_EXC_ERR || status == IBV_WC_RNR_RETRY_EXC_ERR;
        switch (c) {
        case condition::connection_lost: return status == IBV_WC_WR_FLUSH_ERR || retries_exhausted;
        case condition::timed_out: return retries_exhausted;
        default: return false;
        }
    }
};

constexpr condition_category_impl the_condition_category;

} // namespace

const boost::system::error_category& error_category() noexcept { return the_category; }

const boost::system::error_category& work_completion_category() noexcept { return the_wc_category; }

const boost::system::error_category& condition_category() noexcept { return the_condition_category; }

} // namespace rdmacm
