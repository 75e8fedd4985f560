#pragma once
// What the compiled base of every I/O object holds: its shared state (a *_impl compiled in
// src/) and the executor it was made with. Moved from, it keeps that executor, as Asio's I/O
// objects do, so that operations on it complete with errc::not_open instead of having
// nowhere to run; assigned to, it is closed first (`Derived::close()`).
#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <utility>

namespace rdmacm::detail {

template <typename Derived, typename Impl>
class io_handle {
protected:
    friend struct access;
    using executor_type = boost::asio::any_io_executor;

    io_handle(executor_type ex, std::shared_ptr<Impl>&& impl) noexcept
        : executor_(std::move(ex)), impl_(std::move(impl)) {}
    io_handle(io_handle&& other) noexcept
        : executor_(other.executor_), // NOLINT(performance-move-constructor-init): kept, see above
          impl_(std::move(other.impl_)) {}
    io_handle& operator=(io_handle&& other) noexcept {
        if (this != &other) {
            static_cast<Derived&>(*this).close();
            executor_ = other.executor_;
            impl_ = std::move(other.impl_);
        }
        return *this;
    }
    ~io_handle() = default;

    executor_type executor_;
    std::shared_ptr<Impl> impl_;
};

} // namespace rdmacm::detail
