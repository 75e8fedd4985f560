#include "cm/context_channel.hpp"

#include "cm/channel_impl.hpp"
#include "common/context_bound.hpp"

#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/query.hpp>

#include <mutex>

namespace rdmacm::detail {
namespace {

// Holds the context's channel weakly: its ids own it, not the context.
class channel_service : public boost::asio::execution_context::service {
public:
    static inline boost::asio::execution_context::id id;
    using key_type = channel_service;

    explicit channel_service(boost::asio::execution_context& ctx) : service(ctx) {}

    // `reader`: the context's own executor, where a new channel's reader runs.
    owned_channel get(const boost::asio::any_io_executor& reader) {
        if (auto ch = share()) return ch;
        // Made out of the lock: its start posts through the executor, which may be a user's
        // whose execute() makes an id here too.
        owned_channel made(channel_impl::create(reader, fd_reader::liveness::operations));
        owned_channel other; // (one made meanwhile by another thread: ours goes, out of the lock)
        {
            std::lock_guard lock(mutex_);
            if (auto ch = channel_.lock(); ch && ch->try_add_owner())
                other = owned_channel(std::move(ch));
            else
                channel_ = made.get();
        }
        return other ? std::move(other) : std::move(made);
    }

private:
    void shutdown() override {} // (each channel is a member of the context: context_bound)

    // The channel with an owner more, unless it has none left (its reader is stopping).
    owned_channel share() {
        std::lock_guard lock(mutex_);
        if (auto ch = channel_.lock(); ch && ch->try_add_owner()) return owned_channel(std::move(ch));
        return {};
    }

    std::mutex mutex_;
    std::weak_ptr<channel_impl> channel_;
};

} // namespace

owned_channel::~owned_channel() {
    if (channel_) channel_->remove_owner();
}

owned_channel context_channel(const boost::asio::any_io_executor& ex) {
    // The context asked of the reader's executor, once: a pooled connection's executor
    // follows it to another shard at any time, and the reader must run on the context
    // whose channel it reads.
    const auto reader = context_executor(ex);
    auto& context = boost::asio::query(reader, boost::asio::execution::context);
    return boost::asio::use_service<channel_service>(context).get(reader);
}

} // namespace rdmacm::detail
