#pragma once
// The credits of a stream's connection, as plain code without I/O (the wire format and the
// rules: docs/stream-protocol.md). A message sent with no receive posted for it ends an
// iWARP connection (siw: no receiver-not-ready retry, semantics T4), so every message — data
// and credits alike — is sent only against a receive the peer has said it posted. Counts are
// cumulative positions, never increments: a header carries how many receives its sender has
// posted, and how many bytes of its ring it has read, so far, so a count heard late or twice
// changes nothing (a per-message increment released out of order is how a writer comes to
// overwrite what was not read). The data goes into the peer's ring, never beyond what the
// peer has read of it.
// tests/stream_credits_explorer_test.cpp runs two of these against every interleaving of
// writers, readers and the wire, and checks that none deadlocks, none sends into a receive
// queue with no room, and that credits alone are not sent back and forth without end.
#include <compare>
#include <cstdint>

namespace rdmacm::detail {

// How many receives each side keeps posted, and how they are shared out.
struct stream_credit_rules {
    std::uint32_t depth;     // receives posted for the peer's messages
    std::uint32_t reserve;   // of those, kept for messages of credits alone (data never takes them)
    std::uint32_t threshold; // freed receives not yet told of that make a message of credits alone due
    friend auto operator<=>(const stream_credit_rules&, const stream_credit_rules&) = default;
    // The stream's rules for `depth` receives (at least 3): a reserve of one, told at half
    // the data window — never at one (see credits_due), and at three at least where the
    // window allows: a side taking turns with its peer (a request, then its response) takes
    // in two messages a turn once the peer sends credits alone, and two would make its next
    // message of credits alone due, every turn (tests/stream_credits_explorer_test.cpp).
    static constexpr stream_credit_rules for_depth(std::uint32_t depth) noexcept {
        const std::uint32_t window = depth - 1;
        const std::uint32_t least = window < 3 ? 2 : 3;
        return {depth, 1, window / 2 > least ? window / 2 : least};
    }
};

// What a message tells the peer, as counts (positions, never increments).
struct stream_counts {
    std::uint32_t posted;   // receives posted here for the peer's messages, so far
    std::uint32_t consumed; // bytes read here out of the ring the peer writes, so far
    friend auto operator<=>(const stream_counts&, const stream_counts&) = default;
};

// One side of a connection: what it may send, and what it owes the peer. Two resources
// each way: the peer's receives (every message takes one) and the peer's ring (data takes
// its bytes). Both are told of as positions in every message.
class stream_credits {
public:
    // `rules.depth` receives posted here and a ring of `ring` bytes; the peer said it posted
    // `peer_depth` and has a ring of `peer_ring` bytes (its hello).
    stream_credits(stream_credit_rules rules, std::uint32_t ring, std::uint32_t peer_depth,
                   std::uint32_t peer_ring) noexcept
        : rules_(rules), ring_(ring), peer_ring_(peer_ring), peer_posted_(peer_depth), posted_(rules.depth),
          advertised_(rules.depth) {}

    // Receives the peer has room for, as last heard.
    std::uint32_t window() const noexcept { return peer_posted_ - sent_; }
    // Bytes the peer's ring has room for, as last heard.
    std::uint32_t room() const noexcept { return peer_ring_ - (written_ - peer_consumed_); }
    // Whether a message with data (at most room() bytes of it), or the end of the data, may
    // go now.
    bool may_send_data() const noexcept { return window() > rules_.reserve; }
    // Whether a message of credits alone is due: enough freed receives, or half the ring's
    // bytes, not told of, and room for it. (A message with data that goes first tells of
    // them instead.)
    bool credits_due() const noexcept {
        return window() >= 1 && (unadvertised() >= rules_.threshold || unadvertised_bytes() >= ring_ - ring_ / 2);
    }
    // Freed receives, and bytes read, the peer has not been told of.
    std::uint32_t unadvertised() const noexcept { return posted_ - advertised_; }
    std::uint32_t unadvertised_bytes() const noexcept { return consumed_ - consumed_told_; }

    // A message goes (any kind, checked by the caller), with `bytes` of data written into
    // the peer's ring before it (at most room()): the counts to put in its header.
    stream_counts sent(std::uint32_t bytes = 0) noexcept {
        ++sent_;
        written_ += bytes;
        advertised_ = posted_;
        consumed_told_ = consumed_;
        return {posted_, consumed_};
    }
    // A message of the peer's arrived, carrying its counts: the window and the room grow to
    // them (a count older than one heard already changes nothing; counts wrap at 2^32).
    // False, and nothing heard, when the peer says it read bytes never written to it.
    bool heard(stream_counts peer) noexcept {
        const std::uint32_t newly_read = peer.consumed - peer_consumed_;
        if (static_cast<std::int32_t>(newly_read) > 0) {
            if (newly_read > written_ - peer_consumed_) return false;
            peer_consumed_ = peer.consumed;
        }
        if (static_cast<std::int32_t>(peer.posted - peer_posted_) > 0) peer_posted_ = peer.posted;
        return true;
    }
    // A receive was posted again here (its message read, or one of credits alone taken in).
    void reposted() noexcept { ++posted_; }
    // `bytes` were read here out of the ring.
    void consumed(std::uint32_t bytes) noexcept { consumed_ += bytes; }

    friend auto operator<=>(const stream_credits&, const stream_credits&) = default; // (for explorers)

private:
    stream_credit_rules rules_;
    std::uint32_t ring_;              // bytes of the ring here
    std::uint32_t peer_ring_;         // bytes of the peer's
    std::uint32_t sent_ = 0;          // messages sent, every kind
    std::uint32_t written_ = 0;       // bytes written into the peer's ring
    std::uint32_t peer_posted_;       // receives the peer has posted, as last heard
    std::uint32_t peer_consumed_ = 0; // bytes the peer has read, as last heard
    std::uint32_t posted_;            // receives posted here for the peer
    std::uint32_t advertised_;        // posted_ as last sent to the peer
    std::uint32_t consumed_ = 0;      // bytes read here
    std::uint32_t consumed_told_ = 0; // consumed_ as last sent to the peer
};

} // namespace rdmacm::detail
