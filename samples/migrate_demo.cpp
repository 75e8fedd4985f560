// migrate_demo ADDRESS: an established RDMA connection moves, live, from one io_context
// (thread A) to another (thread B) and carries on there.
//
// The server runs on its own thread S. The client connects on A and starts waiting for
// its next CM event; while that wait is outstanding, the id migrates to B. The server then
// disconnects: the client's wait completes on B, and so does its own disconnect. Every
// line says which thread ran it.
#include <rdmacm/rdmacm.hpp>

#include <boost/asio/post.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>

#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace asio = boost::asio;
using rdmacm::error_code;

namespace {

std::mutex print_mutex;
std::map<std::thread::id, char> thread_names;

void say(const std::string& what) {
    std::lock_guard lock(print_mutex);
    auto it = thread_names.find(std::this_thread::get_id());
    std::cout << "[thread " << (it == thread_names.end() ? '?' : it->second) << "] " << what << std::endl;
}

void check(const error_code& ec, const char* what) {
    if (ec) {
        say(std::string(what) + " failed: " + ec.what());
        std::exit(1);
    }
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: migrate_demo ADDRESS\n";
        return 2;
    }
    asio::io_context s, a, b;
    std::vector<std::thread> threads;
    thread_names[std::this_thread::get_id()] = 'M';
    auto guards = std::make_tuple(asio::make_work_guard(s), asio::make_work_guard(a), asio::make_work_guard(b));
    for (auto [ctx, name] : {std::pair{&s, 'S'}, std::pair{&a, 'A'}, std::pair{&b, 'B'}}) {
        threads.emplace_back([ctx = ctx] { ctx->run(); });
        std::lock_guard lock(print_mutex);
        thread_names[threads.back().get_id()] = name;
    }
    {
        rdmacm::event_channel server_channel(s), channel_a(a), channel_b(b);
        rdmacm::listener l(server_channel);
        l.bind({asio::ip::make_address(argv[1]), 0});
        l.listen();
        std::optional<rdmacm::cm_id> server, client_storage;
        std::promise<void> finished;

        l.async_get_request([&](error_code ec, rdmacm::connection_request req) {
            check(ec, "accept");
            say("server: connection request");
            server.emplace(std::move(req.id));
            auto attr = rdmacm::rc_qp_init_attr();
            server->create_qp(attr);
            server->async_accept({}, [&](error_code aec, rdmacm::cm_event) {
                check(aec, "server accept");
                say("server: ESTABLISHED");
            });
        });

        auto& client = client_storage.emplace(channel_a);
        rdmacm::connect_options options;
        options.qp = rdmacm::rc_qp_init_attr();
        rdmacm::async_connect(client, {asio::ip::make_address(argv[1]), l.local_endpoint().port()}, options,
                              [&](error_code ec, rdmacm::cm_event ev) {
                                  check(ec, "connect");
                                  say(std::string("client: ") + rdmacm::to_string(ev.type()));
                                  // Wait for whatever comes next; it will come on B.
                                  client.async_next_event([&](error_code nec, rdmacm::cm_event next) {
                                      check(nec, "next event");
                                      say(std::string("client: ") + rdmacm::to_string(next.type()) +
                                          " (peer disconnected)");
                                      client.async_disconnect([&](error_code dec) {
                                          check(dec, "disconnect");
                                          say("client: disconnected");
                                          finished.set_value();
                                      });
                                  });
                                  say("client: migrating the live connection to B");
                                  client.async_migrate(channel_b, [&](error_code mec) {
                                      check(mec, "migrate");
                                      say("client: migrated; now the server disconnects");
                                      asio::post(s, [&] {
                                          say("server: disconnecting");
                                          server->async_disconnect([](error_code) { say("server: disconnected"); });
                                      });
                                  });
                              });
        if (finished.get_future().wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
            std::cerr << "migrate_demo: timed out\n";
            return 1;
        }
    }
    // Ids and channels are gone: let the threads run out of work.
    std::apply([](auto&... g) { (g.reset(), ...); }, guards);
    for (auto& t : threads) t.join();
    say("done");
}
