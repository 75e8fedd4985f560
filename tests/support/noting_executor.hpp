#pragma once
// An executor that counts what it is given to run, then hands it to the one it wraps: a
// test sees that a completion has been queued for a handler (the operation decided to
// complete) while that handler has not run yet — its context not being run.
#include <boost/asio/execution.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/require.hpp>

#include <atomic>
#include <cstddef>
#include <memory>
#include <utility>

namespace rdmacm::test {

template <typename Inner>
class noting_executor {
public:
    noting_executor(Inner inner, std::shared_ptr<std::atomic<std::size_t>> given)
        : inner_(std::move(inner)), given_(std::move(given)) {}

    template <typename F>
    void execute(F&& f) const {
        given_->fetch_add(1);
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
        return {std::move(other), given_};
    }

    Inner inner_;
    std::shared_ptr<std::atomic<std::size_t>> given_;
};

} // namespace rdmacm::test
