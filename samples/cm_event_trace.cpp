// cm_event_trace ADDRESS: a client connects to a server on ADDRESS over raw librdmacm
// (one process, two non-blocking event channels) and every CM event is printed as it
// arrives: what the library builds on, seen on the real kernel CM.
#include <rdma/rdma_cma.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace {

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "cm_event_trace: %s: %s\n", what, std::strerror(errno));
    std::exit(1);
}

rdma_event_channel* nonblocking_channel() {
    rdma_event_channel* ch = rdma_create_event_channel();
    if (!ch) fail("rdma_create_event_channel");
    if (fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) != 0) fail("fcntl");
    return ch;
}

void create_qp(rdma_cm_id* id) {
    ibv_qp_init_attr attr{};
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    if (rdma_create_qp(id, nullptr, &attr) != 0) fail("rdma_create_qp");
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: cm_event_trace IPV4-ADDRESS-OF-AN-RDMA-NETDEV\n");
        return 2;
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) {
        std::fprintf(stderr, "cm_event_trace: not an IPv4 address: %s\n", argv[1]);
        return 2;
    }
    auto* sa = reinterpret_cast<sockaddr*>(&addr);
    rdma_event_channel* channels[2] = {nonblocking_channel(), nonblocking_channel()};
    const char* side[2] = {"server", "client"};

    rdma_cm_id *listener, *client, *conn = nullptr;
    if (rdma_create_id(channels[0], &listener, nullptr, RDMA_PS_TCP)) fail("rdma_create_id");
    if (rdma_bind_addr(listener, sa) || rdma_listen(listener, 1)) fail("rdma_bind_addr/rdma_listen");
    addr.sin_port = rdma_get_src_port(listener);
    std::printf("server: listening on %s port %u (%s)\n", argv[1], ntohs(addr.sin_port),
                ibv_get_device_name(listener->verbs->device));
    if (rdma_create_id(channels[1], &client, nullptr, RDMA_PS_TCP)) fail("rdma_create_id");
    if (rdma_resolve_addr(client, nullptr, sa, 2000)) fail("rdma_resolve_addr");

    int disconnected = 0;
    while (disconnected < 2) {
        pollfd fds[2] = {{channels[0]->fd, POLLIN, 0}, {channels[1]->fd, POLLIN, 0}};
        if (::poll(fds, 2, 10000) == 0) {
            std::fprintf(stderr, "cm_event_trace: no CM event for 10 s\n");
            return 1;
        }
        for (int s = 0; s < 2; ++s) {
            rdma_cm_event* ev;
            while (rdma_get_cm_event(channels[s], &ev) == 0) { // drain to EAGAIN
                rdma_cm_event_type type = ev->event;
                rdma_cm_id* id = ev->id;
                std::printf("%s: %-16s status %d\n", side[s], rdma_event_str(type), ev->status);
                if (ev->status != 0) return 1;
                rdma_ack_cm_event(ev);
                rdma_conn_param param{};
                param.responder_resources = param.initiator_depth = 1;
                switch (type) {
                case RDMA_CM_EVENT_ADDR_RESOLVED:
                    if (rdma_resolve_route(id, 2000)) fail("rdma_resolve_route");
                    break;
                case RDMA_CM_EVENT_ROUTE_RESOLVED:
                    create_qp(id);
                    if (rdma_connect(id, &param)) fail("rdma_connect");
                    break;
                case RDMA_CM_EVENT_CONNECT_REQUEST:
                    conn = id;
                    create_qp(conn);
                    if (rdma_accept(conn, &param)) fail("rdma_accept");
                    break;
                case RDMA_CM_EVENT_ESTABLISHED:
                    if (s == 1 && rdma_disconnect(client)) fail("rdma_disconnect");
                    break;
                case RDMA_CM_EVENT_DISCONNECTED:
                    ++disconnected;
                    if (s == 0 && rdma_disconnect(conn)) fail("rdma_disconnect");
                    break;
                default: break;
                }
            }
            if (errno != EAGAIN) fail("rdma_get_cm_event");
        }
    }
    for (rdma_cm_id* id : {conn, client}) {
        rdma_destroy_qp(id);
        rdma_destroy_id(id);
    }
    rdma_destroy_id(listener);
    for (auto* ch : channels) rdma_destroy_event_channel(ch);
    std::printf("done\n");
}
