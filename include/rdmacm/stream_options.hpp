#pragma once
/// @file
/// `rdmacm::stream_options`: the sizes of a stream's connection.
#include <chrono>
#include <cstdint>

namespace rdmacm {

/// The sizes of a `basic_stream`'s connection. Each side tells the other its `depth` and
/// its ring as the connection opens (docs/stream-protocol.md); the two sides' options need
/// not match.
struct stream_options {
    /// Receives kept posted for the peer's messages: how many messages the peer may have on
    /// the way before this side has read them. At least 3 (one is kept for credits). Each
    /// holds a message: its 16-byte header, and up to 1,008 bytes of data carried in it
    /// (more goes into the ring by RDMA write).
    ///
    /// Few by default: a message, however few bytes it tells of, is a post, a completion
    /// and a wake-up on each side, and the writes made while the peer's window is shut go as
    /// one. With 3 messages in flight, a run of small writes goes as a few large messages;
    /// with 15 most went as a message each, several times slower on one host
    /// (docs/benchmarks.md: `bench/stream_compare.sh`'s `stream_many` row).
    std::uint32_t depth = 4;
    /// Bytes of each of the stream's two rings: the one the peer writes its data into (by
    /// RDMA write), and the one this side's writes fill. A message carries up to half the
    /// smaller of this side's and the peer's. At least 2, at most 2^30 (else EINVAL, "stream_options").
    std::uint32_t ring_size = 262144;
    /// Messages of data this side has in flight at most (one more is kept for credits).
    std::uint32_t send_depth = 4;
    /// As a socket's `TCP_NODELAY`. False (the default): Nagle's rule, as Linux's TCP has
    /// it (Minshall's variant). While a short message (one packet: 1,008 bytes or less, and
    /// less than the largest, half the smaller ring) is
    /// in flight, a write that leaves a short message does not send it yet: the writes after
    /// it join it, and it goes once the earlier one completes (over RoCE and InfiniBand,
    /// when the peer's device acknowledged it, with no delayed acknowledgement to wait for;
    /// over iWARP, when TCP took it). Small writes in a row then go as fewer messages, each
    /// a post and a completion fewer; a message of more than a packet, and any write with
    /// no short message in flight, go at once. True: each write goes at once, as the peer's window
    /// allows.
    bool no_delay = false;
    /// As `queue_pair_options::poll_for`: zero, event-driven; positive, adaptive polling —
    /// after a wake-up the context's thread polls until no message or completion has come
    /// for `poll_for`, also between reads (the stream's receives stay posted), while its
    /// keep-alive's probes do not keep it polling. `busy_polling` polls only while an
    /// operation waits: between reads it sleeps.
    std::chrono::nanoseconds poll_for{0};
    /// How long each of the connect's two resolutions may take (`connect_options`).
    std::chrono::milliseconds resolve_timeout{2000};
    /// Probes of the peer: once connected, every `keep_alive` in which this side sent
    /// nothing, a zero-length RDMA write (it takes none of the peer's receives, and the
    /// peer's application sees nothing). A peer whose host went without a word (no
    /// disconnect) is then learnt of within about two intervals and the transport's retries
    /// (`ack_timeout` times the connecting side's `retry_count`; iWARP: TCP's), also by a
    /// side that only reads, or a writer waiting for the peer's credits: their operations
    /// complete with `asio::error::connection_reset` (docs/reliability.md). Looks are made on
    /// the library's background thread (one may wait behind a destroy that blocks there:
    /// siw, up to 10 s). Zero (the default): no probes, as a socket without SO_KEEPALIVE —
    /// such a side is told only if the peer's kernel says so. At most a day (else EINVAL,
    /// "stream_options").
    std::chrono::milliseconds keep_alive{0};
    /// As `conn_params::ack_timeout`, for the stream's connect or accept (0: the CM's own;
    /// above 31: EINVAL, "stream_options").
    std::uint8_t ack_timeout = 0;
};

} // namespace rdmacm
