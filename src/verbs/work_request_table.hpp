#pragma once
// The handlers of a queue pair's posted work requests, found by the work request id the
// device hands back: a slab of slots reused through a free list (no allocation per work
// request once it has grown to the queue's depth). An id names its slot and the post's
// serial number, so an id that completed long ago (a cancellation that comes late) never
// matches the slot's next user, and what is left is taken in posting order. No I/O, no
// lock: the queue pair's mutex guards it (tests/work_request_table_test.cpp).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

namespace rdmacm::detail {

template <typename Handler>
class work_request_table {
public:
    // Keeps `h`; returns the work request id to post it with (never 0). One `on_device`
    // false is never posted: it completes, in posting order, once it is the oldest
    // (take_oldest_unposted). One `standing` (a receive kept posted for messages nobody
    // asked for yet: a receive pool's) is not counted by awaited().
    std::uint64_t insert(Handler h, bool on_device = true, bool standing = false) {
        std::uint32_t index;
        if (free_.empty()) {
            if (slots_.size() > index_mask) throw std::length_error("work_request_table: more than 2^24 waiting");
            index = static_cast<std::uint32_t>(slots_.size());
            slots_.emplace_back();
        } else {
            index = free_.back();
            free_.pop_back();
        }
        auto& s = slots_[index];
        s.serial = next_serial_++;
        s.handler = std::move(h);
        s.on_device = on_device;
        s.standing = standing;
        unposted_ += on_device ? 0 : 1;
        standing_ += standing ? 1 : 0;
        ++size_;
        return s.serial << index_bits | index;
    }

    // Whether `wr_id` waits (posted, not taken).
    bool contains(std::uint64_t wr_id) const noexcept { return find(wr_id) != nullptr; }
    // Whether `wr_id` waits, inserted standing.
    bool standing(std::uint64_t wr_id) const noexcept {
        const slot* s = find(wr_id);
        return s && s->standing;
    }

    // The handler of `wr_id`, taken out; empty if it is not waiting (taken already).
    std::optional<Handler> take(std::uint64_t wr_id) {
        std::optional<Handler> h;
        if (auto* s = find(wr_id)) {
            h.emplace(std::move(*s->handler));
            release(*s, static_cast<std::uint32_t>(wr_id & index_mask));
        }
        return h;
    }

    // Every waiting handler, taken out in posting order, with its id.
    std::vector<std::pair<std::uint64_t, Handler>> take_all() {
        std::vector<std::uint32_t> waiting;
        for (std::uint32_t i = 0; i < slots_.size(); ++i)
            if (slots_[i].handler) waiting.push_back(i);
        std::sort(waiting.begin(), waiting.end(),
                  [&](std::uint32_t a, std::uint32_t b) { return slots_[a].serial < slots_[b].serial; });
        std::vector<std::pair<std::uint64_t, Handler>> all;
        all.reserve(waiting.size());
        for (auto i : waiting) {
            all.emplace_back(slots_[i].serial << index_bits | i, std::move(*slots_[i].handler));
            release(slots_[i], i);
        }
        return all;
    }

    // The oldest waiting handler, taken out with its id, if it was never posted (none
    // posted before it waits: it goes in its turn). Rare: a scan of the slots.
    std::optional<std::pair<std::uint64_t, Handler>> take_oldest_unposted() {
        if (unposted_ == 0) return std::nullopt;
        slot* oldest = nullptr;
        std::uint32_t at = 0;
        for (std::uint32_t i = 0; i < slots_.size(); ++i)
            if (slots_[i].handler && (!oldest || slots_[i].serial < oldest->serial)) oldest = &slots_[i], at = i;
        if (!oldest || oldest->on_device) return std::nullopt;
        std::optional<std::pair<std::uint64_t, Handler>> taken;
        taken.emplace(oldest->serial << index_bits | at, std::move(*oldest->handler));
        release(*oldest, at);
        return taken;
    }

    bool empty() const noexcept { return size_ == 0; }
    bool has_unposted() const noexcept { return unposted_ != 0; }
    std::size_t size() const noexcept { return size_; }
    // Those waiting that are not standing: an operation somebody waits for.
    std::size_t awaited() const noexcept { return size_ - standing_; }

private:
    // 24 bits of slot (a queue far deeper than any device's), 40 of serial: an id comes
    // back only after 2^40 posts on one queue pair.
    static constexpr unsigned index_bits = 24;
    static constexpr std::uint64_t index_mask = (std::uint64_t{1} << index_bits) - 1;
    static constexpr std::uint64_t serial_mask = (std::uint64_t{1} << (64 - index_bits)) - 1;

    struct slot {
        std::uint64_t serial = 0; // of the post it holds (posting order)
        std::optional<Handler> handler;
        bool on_device = true;
        bool standing = false;
    };

    const slot* find(std::uint64_t wr_id) const noexcept {
        const auto index = wr_id & index_mask;
        if (index >= slots_.size()) return nullptr;
        const auto& s = slots_[index];
        return s.handler && (s.serial & serial_mask) == (wr_id >> index_bits) ? &s : nullptr;
    }
    slot* find(std::uint64_t wr_id) noexcept { return const_cast<slot*>(std::as_const(*this).find(wr_id)); }
    void release(slot& s, std::uint32_t index) {
        s.handler.reset();
        unposted_ -= s.on_device ? 0 : 1;
        standing_ -= s.standing ? 1 : 0;
        free_.push_back(index);
        --size_;
    }

    std::vector<slot> slots_;
    std::vector<std::uint32_t> free_;
    std::uint64_t next_serial_ = 1;
    std::size_t size_ = 0;
    std::size_t unposted_ = 0;
    std::size_t standing_ = 0;
};

} // namespace rdmacm::detail
