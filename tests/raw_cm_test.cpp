// Raw librdmacm on a non-blocking event channel, no library code: proves the test bed's
// kernel CM works on this device, and pins down the event sequence the library builds on.
#include "support/test_device.hpp"

#include <boost/test/unit_test.hpp>

#include <rdma/rdma_cma.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>

namespace {

using namespace std::chrono_literals;

struct channel_deleter {
    void operator()(rdma_event_channel* c) const { rdma_destroy_event_channel(c); }
};
using channel_ptr = std::unique_ptr<rdma_event_channel, channel_deleter>;

struct id_deleter {
    void operator()(rdma_cm_id* id) const {
        if (id->qp) rdma_destroy_qp(id);
        rdma_destroy_id(id);
    }
};
using id_ptr = std::unique_ptr<rdma_cm_id, id_deleter>;

channel_ptr make_nonblocking_channel() {
    channel_ptr ch(rdma_create_event_channel());
    BOOST_REQUIRE_MESSAGE(ch, "rdma_create_event_channel: " << std::strerror(errno));
    int flags = fcntl(ch->fd, F_GETFL);
    BOOST_REQUIRE(fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) == 0);
    return ch;
}

struct event_copy {
    rdma_cm_event_type type;
    int status;
    rdma_cm_id* id;
    rdma_cm_id* listen_id;
    std::string private_data;
};

// Next event on a non-blocking channel, copied and acked at once; fails after `limit`.
event_copy next_event(rdma_event_channel* ch, std::chrono::milliseconds limit = 10s) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
        rdma_cm_event* ev = nullptr;
        if (rdma_get_cm_event(ch, &ev) == 0) {
            event_copy c{ev->event, ev->status, ev->id, ev->listen_id, {}};
            auto* pd = static_cast<const char*>(ev->param.conn.private_data);
            if (pd) c.private_data.assign(pd, ev->param.conn.private_data_len);
            rdma_ack_cm_event(ev);
            return c;
        }
        BOOST_REQUIRE_MESSAGE(errno == EAGAIN, "rdma_get_cm_event: " << std::strerror(errno));
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        BOOST_REQUIRE_MESSAGE(left.count() > 0, "no CM event within " << limit.count() << " ms");
        pollfd p{ch->fd, POLLIN, 0};
        ::poll(&p, 1, static_cast<int>(left.count()));
    }
}

void expect(const event_copy& e, rdma_cm_event_type t) {
    BOOST_REQUIRE_MESSAGE(e.type == t, "expected " << rdma_event_str(t) << ", got " << rdma_event_str(e.type)
                                                   << " (status " << e.status << ")");
    BOOST_REQUIRE_EQUAL(e.status, 0);
}

sockaddr_in ipv4(const std::string& addr, uint16_t port) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    BOOST_REQUIRE(inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) == 1);
    return sa;
}

void create_qp(rdma_cm_id* id) {
    ibv_qp_init_attr attr{};
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    // NULL PD and CQs: librdmacm uses the device's default PD and creates the CQs.
    BOOST_REQUIRE_MESSAGE(rdma_create_qp(id, nullptr, &attr) == 0, "rdma_create_qp: " << std::strerror(errno));
}

} // namespace

BOOST_AUTO_TEST_CASE(resolve_connect_accept_establish_disconnect) {
    const auto& dev = rdmacm::test::test_device();
    BOOST_TEST_MESSAGE("device " << dev.name << " at " << dev.ipv4);

    auto server_ch = make_nonblocking_channel();
    auto client_ch = make_nonblocking_channel();

    rdma_cm_id* raw = nullptr;
    BOOST_REQUIRE(rdma_create_id(server_ch.get(), &raw, nullptr, RDMA_PS_TCP) == 0);
    id_ptr listener(raw);
    auto bind_to = ipv4(dev.ipv4, 0);
    BOOST_REQUIRE_MESSAGE(rdma_bind_addr(listener.get(), reinterpret_cast<sockaddr*>(&bind_to)) == 0,
                          "rdma_bind_addr: " << std::strerror(errno));
    BOOST_REQUIRE(rdma_listen(listener.get(), 8) == 0);
    uint16_t port = ntohs(rdma_get_src_port(listener.get()));
    BOOST_REQUIRE_NE(port, 0);

    BOOST_REQUIRE(rdma_create_id(client_ch.get(), &raw, nullptr, RDMA_PS_TCP) == 0);
    id_ptr client(raw);
    auto src = ipv4(dev.ipv4, 0), dst = ipv4(dev.ipv4, port);
    BOOST_REQUIRE(rdma_resolve_addr(client.get(), reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst),
                                    2000) == 0);
    expect(next_event(client_ch.get()), RDMA_CM_EVENT_ADDR_RESOLVED);
    BOOST_REQUIRE(rdma_resolve_route(client.get(), 2000) == 0);
    expect(next_event(client_ch.get()), RDMA_CM_EVENT_ROUTE_RESOLVED);

    create_qp(client.get());
    const std::string hello = "hello from client";
    rdma_conn_param cp{};
    cp.private_data = hello.data();
    cp.private_data_len = static_cast<uint8_t>(hello.size());
    cp.responder_resources = cp.initiator_depth = 1;
    cp.retry_count = 7;
    BOOST_REQUIRE_MESSAGE(rdma_connect(client.get(), &cp) == 0, "rdma_connect: " << std::strerror(errno));

    auto req = next_event(server_ch.get());
    expect(req, RDMA_CM_EVENT_CONNECT_REQUEST);
    BOOST_CHECK(req.listen_id == listener.get());
    // The peer's private data may be padded by the transport (IB CM pads to 56 bytes).
    BOOST_CHECK_EQUAL(req.private_data.substr(0, hello.size()), hello);
    id_ptr conn(req.id);
    create_qp(conn.get());
    rdma_conn_param accept_param{};
    accept_param.responder_resources = accept_param.initiator_depth = 1;
    BOOST_REQUIRE_MESSAGE(rdma_accept(conn.get(), &accept_param) == 0, "rdma_accept: " << std::strerror(errno));

    expect(next_event(client_ch.get()), RDMA_CM_EVENT_ESTABLISHED);
    expect(next_event(server_ch.get()), RDMA_CM_EVENT_ESTABLISHED);

    // On IB (rxe) the initiator's DISCONNECTED waits for the peer's own rdma_disconnect
    // (the DREP), on iWARP it does not: disconnect both sides, as every CM user must.
    BOOST_REQUIRE(rdma_disconnect(client.get()) == 0);
    expect(next_event(server_ch.get()), RDMA_CM_EVENT_DISCONNECTED);
    BOOST_REQUIRE(rdma_disconnect(conn.get()) == 0);
    expect(next_event(client_ch.get()), RDMA_CM_EVENT_DISCONNECTED);

    // Drained: nothing else is queued for either side but, on IB transports, TIMEWAIT_EXIT.
    for (auto* ch : {server_ch.get(), client_ch.get()}) {
        rdma_cm_event* ev = nullptr;
        while (rdma_get_cm_event(ch, &ev) == 0) {
            BOOST_CHECK_MESSAGE(ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT, "unexpected " << rdma_event_str(ev->event));
            rdma_ack_cm_event(ev);
        }
        BOOST_CHECK_EQUAL(errno, EAGAIN);
    }
}
