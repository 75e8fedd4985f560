// The write side of a stream's engine (stream_impl.hpp): a write copied into the send ring, or
// made in it (prepare, then commit); the messages that send the ring's bytes, by RDMA write
// into the peer's ring or in the message itself, as Nagle's rule and the credits let them go;
// and the end of the data.
#include "stream/ring_pieces.hpp"
#include "stream/stream_impl.hpp"

#include "rdmacm/detail/call_error.hpp"

#include <boost/asio/error.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <array>
#include <cstring>

namespace rdmacm::detail {

// Copies what fits of `buffers` into the send ring, after what was written before (small
// writes made while a message waits go as one).
std::size_t stream_impl::buffer_data(const const_buffer_list& buffers) {
    const std::size_t size = options_.ring_size;
    std::size_t copied = 0;
    for (const auto& part : buffers.view()) {
        const std::size_t n = std::min(size - (staged_ - done_), part.size());
        ring_pieces(staged_, n, size, [&](std::size_t offset, std::size_t length, std::size_t before) {
            std::memcpy(send_ring_->buffer.data() + offset, static_cast<const std::byte*>(part.data()) + before,
                        length);
        });
        staged_ += n;
        copied += n;
        if (n < part.size()) break; // the ring is full
    }
    return copied;
}

boost::asio::mutable_buffer stream_impl::free_space(std::size_t most) noexcept {
    const std::size_t size = options_.ring_size, offset = staged_ % size;
    const std::size_t n = std::min({most, size - (staged_ - done_), size - offset});
    return {send_ring_->buffer.data() + offset, n};
}

// Nagle's rule as Linux's TCP has it, Minshall's variant (unless no_delay): a short message
// waits while another short one is in flight; the writes after it join it, and it goes when
// that one completes. A message is short when it would be one packet (its bytes in the send,
// as a segment below TCP's MSS) and less than the largest: what takes a write goes at once,
// or every large write would wait a round trip for the one before it.
bool stream_impl::is_short(std::uint32_t bytes) const noexcept {
    return bytes <= stream_wire::inline_limit && bytes < largest_message_;
}

std::uint32_t stream_impl::next_data() const noexcept {
    const auto bytes =
        static_cast<std::uint32_t>(std::min<std::uint64_t>({staged_ - sent_, credits_->room(), largest_message_}));
    if (bytes == 0 || (is_short(bytes) && !options_.no_delay && short_in_flight_ > 0)) return 0;
    return bytes;
}

bool stream_impl::send_control(stream_wire::kind what) {
    if (control_busy_) return false; // (its completion comes: progress tries again then)
    control_busy_ = true;
    post_message(control_slot(), what, 0);
    return true;
}

void stream_impl::post_message(std::uint32_t slot, stream_wire::kind what, std::uint32_t bytes) {
    std::byte* const header = send_headers_->buffer.data() + std::size_t{slot} * stream_wire::header_size;
    const stream_counts counts = credits_->sent(bytes);
    stream_wire::put(header, {what, counts.posted, counts.consumed, bytes});
    ++posted_sends_;
    answered_ = answered_ || role_ == stream_role::server;
    const bool short_data = what == stream_wire::kind::data && is_short(bytes);
    if (short_data) ++short_in_flight_;
    // A small message's bytes go in it, gathered from the send ring after its header; a
    // larger one's by RDMA write into the peer's ring — one write for each part where that
    // ring wraps — then the message, which RC delivers after them. Each gathers from the
    // send ring in two places at most where it wraps (a message is half of it at most).
    std::array<ibv_sge, 5> from{};
    std::array<work_request, 3> chain{};
    std::size_t sges = 0, wrs = 0;
    const std::uint64_t ring = options_.ring_size;
    auto gather = [&](std::uint64_t at, std::uint64_t end) {
        ring_pieces(at, end - at, ring, [&](std::size_t offset, std::size_t length, std::size_t) {
            from[sges++] = {reinterpret_cast<std::uintptr_t>(send_ring_->buffer.data() + offset),
                            static_cast<std::uint32_t>(length), send_ring_->region.lkey()};
        });
    };
    const bool in_message = bytes <= stream_wire::inline_limit;
    for (std::uint64_t at = sent_, end = sent_ + bytes; !in_message && at < end;) {
        const std::uint64_t to = at % peer_ring_size_, part = std::min(end - at, peer_ring_size_ - to);
        const std::size_t first = sges;
        gather(at, at + part);
        chain[wrs++] = {work_request::kind::write, std::span(from).subspan(first, sges - first),
                        peer_ring_address_ + to, peer_rkey_};
        at += part;
    }
    const std::size_t first = sges;
    from[sges++] = {reinterpret_cast<std::uintptr_t>(header), static_cast<std::uint32_t>(stream_wire::header_size),
                    send_headers_->region.lkey()};
    if (in_message) gather(sent_, sent_ + bytes);
    chain[wrs++] = {work_request::kind::send, std::span(from).subspan(first, sges - first)};
    sent_ += bytes;
    qp_->post(std::span(chain).first(wrs),
              [self = shared_from_this(), slot, bytes, short_data](error_code ec, std::size_t) {
                  self->sent(slot, bytes, short_data, ec);
              });
}

void stream_impl::write(handler h, const const_buffer_list& buffers) {
    const std::uint64_t id = on_cancellation(h.get_cancellation_slot(), &stream_impl::cancel_write);
    std::lock_guard lock(mutex_);
    if (closed_) return post_completion(std::move(h), errc::not_open, 0);
    if (buffers.bytes == 0) return post_completion(std::move(h), {}, 0); // (as a socket's: at once)
    if (writing()) return post_completion(std::move(h), errc::operation_in_progress, 0);
    if (end_ != end_state::none) return post_completion(std::move(h), boost::asio::error::broken_pipe, 0);
    if (broken_) return post_completion(std::move(h), as_seen_by_user(broken_), 0);
    writer_.emplace(waiting_write{std::move(h), buffers, id});
    progress(); // copied into the send ring if it has room, sent as the window and the peer's ring allow
}

void stream_impl::prepare_write(fill_handler h, std::size_t max_size) {
    const std::uint64_t id = on_cancellation(h.get_cancellation_slot(), &stream_impl::cancel_fill);
    std::lock_guard lock(mutex_);
    const boost::asio::mutable_buffer none;
    if (closed_) return post_completion(std::move(h), errc::not_open, none);
    if (max_size == 0) return post_completion(std::move(h), {}, none);
    if (writing()) return post_completion(std::move(h), errc::operation_in_progress, none);
    if (end_ != end_state::none) return post_completion(std::move(h), boost::asio::error::broken_pipe, none);
    if (broken_) return post_completion(std::move(h), as_seen_by_user(broken_), none);
    filler_.emplace(waiting_fill{std::move(h), max_size, id});
    progress(); // handed out if the send ring has room
}

error_code stream_impl::commit_write(std::size_t n) noexcept {
    std::lock_guard lock(mutex_);
    if (closed_) return errc::not_open;
    if (n > handed_out_) return RDMACM_CALL_ERRNO("commit_write", EINVAL);
    handed_out_ = 0;
    if (n == 0) return {};
    if (broken_) return as_seen_by_user(broken_);
    staged_ += n;
    return or_break([&] { progress(); }); // sent as a write's bytes are
}

void stream_impl::shutdown(shutdown_handler h) {
    std::lock_guard lock(mutex_);
    if (closed_) {
        if (h) post_completion(std::move(h), errc::not_open);
        return;
    }
    if (h && shutdown_waiter_) return post_completion(std::move(h), errc::operation_in_progress);
    if (end_ == end_state::none) end_ = end_state::queued;
    if (h) shutdown_waiter_ = std::move(h);
    progress();
}

void stream_impl::hand_out(fill_handler h, std::size_t most) {
    boost::asio::mutable_buffer free;
    error_code ec;
    {
        std::lock_guard lock(mutex_);
        const bool cancelled = unwake(&stream_impl::fill_woken_);
        if (!closed_ && !cancelled && !broken_) {
            free = free_space(most); // (not less than when it was woken: nothing wrote meanwhile)
            handed_out_ = free.size();
        } else {
            ec = broken_ && !closed_ && !cancelled ? as_seen_by_user(broken_)
                                                   : error_code(boost::asio::error::operation_aborted);
            progress(); // (the end of the data may have waited for it)
        }
    }
    std::move(h)(ec, free);
}

} // namespace rdmacm::detail
