// The read side of a stream's engine (stream_impl.hpp): the ring the peer writes into, its
// bytes copied out by a read or handed out in place (then consumed), and the receives posted
// again, with the credits they and the bytes read give back to the peer.
#include "stream/ring_pieces.hpp"
#include "stream/stream_impl.hpp"

#include "rdmacm/detail/call_error.hpp"

#include <boost/asio/error.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cstring>

namespace rdmacm::detail {

void stream_impl::into_ring(std::span<const std::byte> bytes) noexcept {
    ring_pieces(arrived_, bytes.size(), options_.ring_size,
                [&](std::size_t offset, std::size_t length, std::size_t before) {
                    std::memcpy(ring_->buffer.data() + offset, bytes.data() + before, length);
                });
}

void stream_impl::read(handler h, const mutable_buffer_list& buffers) {
    const std::uint64_t id = on_cancellation(h.get_cancellation_slot(), &stream_impl::cancel_read);
    std::lock_guard lock(mutex_);
    if (closed_) return post_completion(std::move(h), errc::not_open, 0);
    // (Empty, at once even beside a read that waits: Asio's TLS stream makes such reads.)
    if (buffers.bytes == 0) return post_completion(std::move(h), {}, 0);
    if (reading()) return post_completion(std::move(h), errc::operation_in_progress, 0);
    reader_.emplace(waiting_read{std::move(h), buffers, id});
    progress(); // woken at once if there is something to read
}

void stream_impl::read_in_place(view_handler h, std::size_t max_size) {
    const std::uint64_t id = on_cancellation(h.get_cancellation_slot(), &stream_impl::cancel_view);
    std::lock_guard lock(mutex_);
    const boost::asio::const_buffer none;
    if (closed_) return post_completion(std::move(h), errc::not_open, none);
    if (max_size == 0) return post_completion(std::move(h), {}, none);
    if (reading()) return post_completion(std::move(h), errc::operation_in_progress, none);
    viewer_.emplace(waiting_view{std::move(h), max_size, id});
    progress(); // woken at once if there is something to read
}

// Each message's bytes read in full: its receive goes back, and counts for the peer (as its
// bytes do).
void stream_impl::take_read(std::size_t n) {
    read_ += n;
    credits_->consumed(static_cast<std::uint32_t>(n));
    while (n > 0) {
        auto& d = data_.front();
        const auto k = static_cast<std::uint32_t>(std::min(n, std::size_t{d.left}));
        d.left -= k;
        n -= k;
        if (d.left == 0) {
            const std::uint32_t slot = d.slot;
            data_.pop_front();
            repost(slot);
        }
    }
}

void stream_impl::deliver(handler h, const mutable_buffer_list& buffers) {
    std::size_t n = 0;
    error_code ec;
    {
        std::lock_guard lock(mutex_);
        const bool cancelled = unwake(&stream_impl::read_woken_);
        if (closed_ || cancelled) {
            ec = boost::asio::error::operation_aborted;
        } else {
            for (const auto& part : buffers.view()) {
                const std::size_t k = std::min(part.size(), static_cast<std::size_t>(arrived_ - read_));
                ring_pieces(read_, k, options_.ring_size,
                            [&](std::size_t offset, std::size_t length, std::size_t before) {
                                std::memcpy(static_cast<std::byte*>(part.data()) + before,
                                            ring_->buffer.data() + offset, length);
                            });
                take_read(k);
                n += k;
                if (k < part.size()) break; // all there was
            }
            if (n == 0) ec = end_heard_ ? error_code(boost::asio::error::eof) : as_seen_by_user(broken_);
            progress(); // credits for what was read
        }
    }
    std::move(h)(ec, n);
}

// The ring's bytes from read_: those handed out before and not consumed, then those after,
// up to where the ring wraps. At the end (or once broken) with nothing after those handed
// out before, it ends with eof (or the error), what is left handed out with it: a parser that
// waited for the rest of a record learns there is none, instead of being handed the same
// bytes without end.
void stream_impl::show(view_handler h, std::size_t most) {
    boost::asio::const_buffer bytes;
    error_code ec;
    {
        std::lock_guard lock(mutex_);
        const bool cancelled = unwake(&stream_impl::view_woken_);
        if (closed_ || cancelled) {
            ec = boost::asio::error::operation_aborted;
        } else { // (not less than when it was woken: nothing read meanwhile)
            if ((end_heard_ || broken_) && arrived_ <= std::max(shown_, read_))
                ec = end_heard_ ? error_code(boost::asio::error::eof) : as_seen_by_user(broken_);
            const std::size_t size = options_.ring_size, offset = read_ % size;
            const std::size_t n = std::min({most, static_cast<std::size_t>(arrived_ - read_), size - offset});
            bytes = {ring_->buffer.data() + offset, n};
            lent_ = n;
            shown_ = std::max(shown_, read_ + n);
        }
    }
    std::move(h)(ec, bytes);
}

error_code stream_impl::consume(std::size_t n) noexcept {
    std::lock_guard lock(mutex_);
    if (closed_) return errc::not_open;
    if (n > lent_) return RDMACM_CALL_ERRNO("consume", EINVAL);
    lent_ = 0;
    if (n == 0) return {}; // (shown_ stays: at the end, the same bytes again are eof)
    shown_ = read_ + n;    // (what is left counts as new)
    return or_break([&] {
        take_read(n);
        progress(); // credits for what was read
    });
}

} // namespace rdmacm::detail
