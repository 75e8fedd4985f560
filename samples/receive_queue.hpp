#pragma once
// For the samples: `depth` receives kept posted on a queue pair, their completions queued
// in an Asio channel a coroutine reads in order. (iWARP has no receiver-not-ready retry:
// a message that finds no receive posted breaks the connection.)
#include <rdmacm/rdmacm.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/experimental/channel.hpp>

#include <memory>
#include <tuple>
#include <vector>

class receive_queue {
public:
    using completions = boost::asio::experimental::channel<void(rdmacm::error_code, std::size_t, std::size_t)>;

    // Registers `depth` slots of `slot_size` bytes on `qp`'s protection domain and posts a
    // receive into each. Completions are queued on `ex`, the reading coroutine's executor
    // (the channel is not thread-safe: a pooled connection's coroutine runs on its strand).
    receive_queue(rdmacm::queue_pair& qp, std::size_t depth, std::size_t slot_size,
                  const boost::asio::any_io_executor& ex)
        : qp_(qp), slot_size_(slot_size), buffer_(depth * slot_size), mr_(qp.pd(), buffer_),
          completions_(std::make_shared<completions>(ex, depth)) {
        for (std::size_t i = 0; i < depth; ++i) post(i);
    }

    // The next message, in order: (error, its length, its slot).
    auto async_next(auto&& token) { return completions_->async_receive(std::forward<decltype(token)>(token)); }
    std::span<std::byte> slot(std::size_t i) { return std::span(buffer_).subspan(i * slot_size_, slot_size_); }
    rdmacm::memory_region& region() { return mr_; }
    // Done with slot `i`: a receive goes back into it.
    void post(std::size_t i) {
        // The channel outlives this object in the handler: receives still posted when the
        // connection goes complete after it (aborted or flushed).
        qp_.async_receive(mr_, slot(i),
                          boost::asio::bind_executor(
                              completions_->get_executor(),
                              [c = completions_, i](rdmacm::error_code ec, std::size_t n) { c->try_send(ec, n, i); }));
    }

private:
    rdmacm::queue_pair& qp_;
    std::size_t slot_size_;
    std::vector<std::byte> buffer_;
    rdmacm::memory_region mr_;
    std::shared_ptr<completions> completions_;
};
