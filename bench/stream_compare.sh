#!/bin/bash
# stream_compare.sh BUILD_DIR DEVICE ADDRESS [REPEATS [SMALL_COUNT LARGE_COUNT]]:
# rdmacm::stream beside what an RDMA user picks today, on one device, all in this one run:
# - Transfers (bench/stream_bench): rstream's transfer test — after a 16-byte exchange, COUNT
#   transfers of SIZE bytes one way, then back — 64 B x SMALL_COUNT (10000) and 64 KiB x
#   LARGE_COUNT (1000) (on one host runs of 1000 x 64 B lasted 20 to 40 ms and swung by up
#   to a factor of three: docs/internals.md, "Small messages inline"), the same options on
#   both sides, for the stream
#   (event-driven, the default; event-driven with each write sent at once,
#   stream_options::no_delay, where the default waits while a message is in flight,
#   Nagle's rule; event-driven with 16 receives and send buffers
#   of 16 KiB, the defaults until 2026-12-07, where today's are 4 of 64 KiB, the same
#   memory: stream_many; each write made in the send ring and each read taken in the
#   receive ring, without the copies (async_prepare_write, async_read_in_place; their bytes
#   left as they are, as ib_write_bw's): stream_inplace;
#   and polling 50 us before it sleeps:
#   stream_options::poll_for; rsockets polls too, by default), rdma-core's
#   rsockets through its own tools rstream and riostream, TCP in the same VM (`rstream -T s`),
#   and the same benchmark code as ours over Asio's own TCP socket (what Asio's operations
#   cost without RDMA). Printed: the median microseconds per transfer and Gb/s (both
#   directions, as rstream counts), and the ratio to ours (their time / ours: above 1, ours
#   is faster). Beside them the device's own limit, from perftest (bench/compare_lib.sh):
#   ib_send_lat's typical latency for 64 B (half a round trip) and ib_write_bw's average
#   bandwidth for 64 KiB.
# - What a transfer costs (64 B): the client's system calls and CPU time per transfer (it
#   sends half of them and receives the other half), counted by the kernel
#   (bench/syscalls_of) — the difference between a run of COUNT 5000 and one of COUNT 1000,
#   over the 8000 more transfers, so that neither the connection nor the start of a process
#   is counted. (The client: rstream's server polls while it waits for the client to
#   connect, a cost that varies with the wait.)
# - HTTP (bench/http_bench): Beast's keep-alive requests, one at a time on one connection,
#   over the stream and over Asio's TCP socket: requests per second.
# One untimed run of each first, then each measured REPEATS times alternately. A run that
# fails or prints no result stops the script, saying so.
set -euo pipefail
build=$1 dev=$2 addr=$3 repeats=${4:-3} small_count=${5:-10000} large_count=${6:-1000}
work=$(mktemp -d)
trap 'rm -rf "$work"; kill $(jobs -p) 2>/dev/null || true' EXIT
# shellcheck source=bench/compare_lib.sh
. "$(dirname "$0")/compare_lib.sh" # (median, number, fail, perftest_run, perftest_hung)
port=7700
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing # (bench/syscalls_of)

# pair SERVER_ROLE CLIENT_ROLE COMMAND...: COMMAND's server (ROLE in COMMAND replaced by
# SERVER_ROLE), then its client, each under $count_with (bench/syscalls_of, or nothing): the
# client's output in $work/client, the server's in $work/server. Ours says when it listens;
# rstream does not.
# A run of rsockets' in which both sides hang (the client polling until its 120 s are up:
# seen on siw across two hosts, 2 of about 40 runs on 2026-12-07 — as siw's first-message
# race, semantics R9, would leave a protocol that does not nudge) is run again, up to twice,
# counted in rsockets_hung.
rsockets_hung=0
pair() {
    local server_role=$1 client_role=$2 try client server
    shift 2
    for try in 1 2 3; do
        server_start "$work/server" "${count_with[@]}" "${@/#ROLE/$server_role}" || fail "$*: no server"
        client=0 server=0
        timeout 120 "${count_with[@]}" "${@/#ROLE/$client_role}" >"$work/client" 2>&1 || client=$?
        server_wait || server=$?
        [ $client = 0 ] && [ $server = 0 ] && return
        [ $client = 124 ] && [[ " $* " != *_bench\ * ]] && [ $try -lt 3 ] || break # (rsockets' only)
        rsockets_hung=$((rsockets_hung + 1))
        echo "stream_compare: $dev: $*: hung for 120 s; again" >&2
    done
    fail "$* failed (client status $client, server $server)" "$work/client" "$work/server"
}

# transfer TOOL SIZE COUNT: one run of rstream's transfer test; the client's microseconds per
# transfer in $work/client (field: see result).
transfer() {
    local tool=$1 size=$2 count=$3 opts=()
    port=$((port + 1))
    case $tool in
    stream) pair server client "$build/bench/stream_bench" ROLE "$addr" $port "$size" "$count" 0 ;;
    stream_poll) pair server client "$build/bench/stream_bench" ROLE "$addr" $port "$size" "$count" 50 ;;
    stream_nodelay) pair server client "$build/bench/stream_bench" ROLE "$addr" $port "$size" "$count" nodelay ;;
    stream_many) pair server client "$build/bench/stream_bench" ROLE "$addr" $port "$size" "$count" many ;;
    stream_inplace) pair server client "$build/bench/stream_bench" ROLE "$addr" $port "$size" "$count" inplace ;;
    asio_tcp) pair server client "$build/bench/stream_bench" ROLE "$addr" $port "$size" "$count" tcp ;;
    rstream | riostream | tcp)
        local cmd=rstream
        [ "$tool" = riostream ] && cmd=riostream
        [ "$tool" = tcp ] && opts=(-T s)
        pair -b -s "$cmd" "${opts[@]}" ROLE "$addr" -p $port -S "$size" -C "$count" ;;
    esac
}
result() { # TOOL: the last transfer's microseconds per transfer
    case $1 in
    stream | stream_poll | stream_nodelay | stream_many | stream_inplace | asio_tcp) awk '$1 == "stream" {print $9}' "$work/client" ;;
    *) awk '$1 == "custom" {print $NF}' "$work/client" ;;
    esac
}

# limit SIZE COUNT: the device's, as perftest measures it, in microseconds per transfer, in $v.
limit() {
    local size=$1 count=$2
    port=$((port + 1))
    if [ "$size" = 64 ]; then
        perftest_run "$work/perftest" ib_send_lat "$dev" "$addr" $port -s "$size" -n "$count" || exit 1
        v=$(awk '$1 == '"$size"' {v = $5} END {print v}' "$work/perftest") # t_typical
    else
        perftest_run "$work/perftest" ib_write_bw "$dev" "$addr" $port -s "$size" -n "$count" --report_gbits || exit 1
        v=$(awk '$1 == '"$size"' && $4 > 0 {v = '"$size"' * 8 / ($4 * 1000)} END {print v}' "$work/perftest") # BW average
    fi
    number "$v" || fail "perftest printed no result" "$work/perftest"
}

count_with=()
tools="stream stream_nodelay stream_many stream_inplace stream_poll rstream riostream tcp asio_tcp"
for cfg in "64 $small_count" "65536 $large_count"; do
    read -r size count <<<"$cfg"
    declare -A usec=()
    for tool in $tools; do transfer "$tool" "$size" "$count"; done # (untimed)
    limit "$size" "$count"
    for _ in $(seq "$repeats"); do
        for tool in $tools; do
            transfer "$tool" "$size" "$count"
            v=$(result "$tool")
            number "$v" || fail "$tool printed no result" "$work/client"
            usec[$tool]+="$v "
        done
        limit "$size" "$count"
        usec[perftest]+="$v "
    done
    echo "stream_compare: $dev: $size B x $count, median of $repeats (usec per transfer, Gb/s both ways, their time / ours event-driven):"
    ours=$(tr ' ' '\n' <<<"${usec[stream]}" | grep . | median)
    [ "$size" = 64 ] && what="perftest (ib_send_lat)" || what="perftest (ib_write_bw)"
    for tool in $tools perftest; do
        m=$(tr ' ' '\n' <<<"${usec[$tool]}" | grep . | median)
        label=$tool
        [ "$tool" = perftest ] && label=$what
        awk -v t="$label" -v m="$m" -v s="$size" -v o="$ours" \
            'BEGIN {printf "  %-24s %10.2f us %8.3f Gb/s   x%.2f\n", t, m, s * 8 / (m * 1000), m / o}'
    done
    unset usec
done
[ "$perftest_hung" = 0 ] || echo "  (perftest runs hung and run again: $perftest_hung)"
[ "$rsockets_hung" = 0 ] || echo "  (rsockets runs hung and run again: $rsockets_hung)"

# What a 64-byte transfer costs the client: (5000 transfers' counts - 1000's) / 8000.
count_with=("$build/bench/syscalls_of")
counts() { awk '$1 == "syscalls" {s = $2} $1 == "cpu_us" {c = $2} END {print s, c}' "$work/client"; }
echo "stream_compare: $dev: what a 64 B transfer costs the client (runs of 5000 less runs of 1000, per transfer):"
for tool in stream rstream asio_tcp; do
    transfer "$tool" 64 1000
    read -r s1 c1 < <(counts)
    transfer "$tool" 64 5000
    read -r s2 c2 < <(counts)
    number "$s1" && number "$s2" && number "$c1" && number "$c2" ||
        fail "syscalls_of printed no counts" "$work/client" "$work/server"
    awk -v t="$tool" -v s1="$s1" -v s2="$s2" -v c1="$c1" -v c2="$c2" \
        'BEGIN {printf "  %-12s %8.2f system calls %10.1f us of CPU\n", t, (s2 - s1) / 8000, (c2 - c1) / 8000}'
done
count_with=()

# Beast's HTTP requests per second over the stream and over TCP.
declare -A rps=()
requests=1000
http() { # [tcp]: requests per second, in $v
    port=$((port + 1))
    pair server client "$build/bench/http_bench" ROLE "$addr" $port $requests "$@"
    v=$(awk '$1 == "http" {print $6}' "$work/client")
    number "$v" || fail "http_bench printed no result" "$work/client"
}
http
http tcp
for _ in $(seq "$repeats"); do
    http
    rps[stream]+="$v "
    http tcp
    rps[tcp]+="$v "
done
ours=$(tr ' ' '\n' <<<"${rps[stream]}" | grep . | median)
theirs=$(tr ' ' '\n' <<<"${rps[tcp]}" | grep . | median)
echo "stream_compare: $dev: Beast HTTP/1.1, $requests keep-alive requests one at a time, median of $repeats (requests per second):"
awk -v o="$ours" -v t="$theirs" 'BEGIN {
    printf "  %-24s %10.1f\n  %-24s %10.1f   (stream / TCP: x%.2f)\n", "over the stream", o, "over Asio TCP", t, o / t }'
