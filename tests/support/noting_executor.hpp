#pragma once
// An executor that tells the test each time it is given a function to run (on the thread
// that gives it), then hands the function to the executor it wraps: a test sees that a
// completion has been queued for a handler while that handler has not run yet (its context
// not being run), or acts at the very moment the library posts to it.
#include <boost/asio/execution.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/require.hpp>

#include <functional>
#include <memory>
#include <utility>

namespace rdmacm::test {

template <typename Inner>
class noting_executor {
public:
    noting_executor(Inner inner, std::function<void()> on_execute)
        : inner_(std::move(inner)), given_(std::make_shared<const std::function<void()>>(std::move(on_execute))) {}

    template <typename F>
    void execute(F&& f) const {
        (*given_)();
        inner_.execute(std::forward<F>(f));
    }

    template <typename Property>
    requires boost::asio::can_query<const Inner&, const Property&>::value decltype(auto)
    query(const Property& p) const {
        return boost::asio::query(inner_, p);
    }
    template <typename Property>
    requires boost::asio::can_require<const Inner&, const Property&>::value auto require(const Property& p) const {
        return wrap(boost::asio::require(inner_, p));
    }
    template <typename Property>
    requires boost::asio::can_prefer<const Inner&, const Property&>::value auto prefer(const Property& p) const {
        return wrap(boost::asio::prefer(inner_, p));
    }

    friend bool operator==(const noting_executor& a, const noting_executor& b) noexcept {
        return a.inner_ == b.inner_ && a.given_ == b.given_;
    }
    friend bool operator!=(const noting_executor& a, const noting_executor& b) noexcept { return !(a == b); }

private:
    template <typename Other>
    noting_executor<Other> wrap(Other other) const {
        return noting_executor<Other>(std::move(other), given_);
    }
    template <typename>
    friend class noting_executor;
    noting_executor(Inner inner, std::shared_ptr<const std::function<void()>> given)
        : inner_(std::move(inner)), given_(std::move(given)) {}

    Inner inner_;
    std::shared_ptr<const std::function<void()>> given_; // shared by the copies
};

} // namespace rdmacm::test
