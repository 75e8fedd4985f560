#pragma once
// Asio parts (executors, strands, descriptors) held by objects whose last reference may go
// on any thread: the destroyer thread, or after the user destroyed the execution context.
// Destroying a strand or a descriptor after its context is gone touches freed memory, so
// such objects register with a service in the context, and its shutdown takes their Asio
// parts from them (compiled in src/context_bound.cpp).
#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <mutex>
#include <vector>

namespace rdmacm::detail {

class context_bound {
public:
    // An execution context's state, shared with its service: whether it lives, and what is
    // bound to it. Bound objects touch their Asio parts only under this mutex while the
    // context lives.
    struct state {
        std::mutex mutex;
        bool alive = true;
        std::vector<context_bound*> members;
    };
    // The state of the context `ex` runs on (its service made on first use).
    static std::shared_ptr<state> state_of(const boost::asio::any_io_executor& ex);

    context_bound() = default;
    context_bound(const context_bound&) = delete;
    context_bound& operator=(const context_bound&) = delete;

    // The context is shutting down: let go of the Asio parts (the state's mutex is held).
    virtual void context_shutdown() noexcept = 0;

protected:
    ~context_bound() = default;
};

// An executor that is let go of when its context shuts down: an id's or a queue pair's,
// which may be freed on the destroyer thread after the user's io_context is gone.
class bound_executor final : public context_bound {
public:
    explicit bound_executor(const boost::asio::any_io_executor& ex) { bind(ex); }
    ~bound_executor() { unbind(); }

    // A copy; empty once the context has shut down (nothing runs there any more).
    boost::asio::any_io_executor get() const noexcept;
    void set(const boost::asio::any_io_executor& ex) {
        unbind();
        bind(ex);
    }

    void context_shutdown() noexcept override { executor_ = {}; }

private:
    void bind(const boost::asio::any_io_executor& ex);
    void unbind() noexcept;

    std::shared_ptr<state> state_;
    boost::asio::any_io_executor executor_;
};

} // namespace rdmacm::detail
