#!/bin/bash
# stream_compare.sh BUILD_DIR ADDRESS [REPEATS]: rdmacm::stream (bench/stream_bench) next to
# what an RDMA user picks today — rdma-core's rsockets, through its own tools rstream and
# riostream — and to TCP in the same VM (`rstream -T s`, and the same benchmark code as ours
# over Asio's own TCP socket: what Asio's operations cost without RDMA), on one device: rstream's transfer
# test (after a 16-byte exchange, COUNT transfers of SIZE bytes one way, then back), 64 B x
# 1000 and 64 KiB x 200, the same options on both sides. Ours runs event-driven (the
# default) and polling 50 us before it sleeps (stream_options::poll_for; rsockets polls too,
# by default). One untimed run of each first, then each measured REPEATS times alternately;
# prints the median microseconds per transfer and Gb/s (both directions, as rstream
# counts), and the ratio to ours (their time / ours: above 1, ours is faster). A run that
# fails or prints no result stops the script, saying so.
set -euo pipefail
build=$1 addr=$2 repeats=${3:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"; kill $(jobs -p) 2>/dev/null || true' EXIT
port=7700
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

# one TOOL SIZE COUNT: one run, server then client; prints the client's usec per transfer.
one() {
    local tool=$1 size=$2 count=$3 server result
    port=$((port + 1))
    case $tool in
    stream | stream_poll | asio_tcp)
        local poll=0
        [ "$tool" = stream_poll ] && poll=50
        [ "$tool" = asio_tcp ] && poll=tcp
        "$build/bench/stream_bench" server "$addr" $port "$size" "$count" $poll >"$work/server" 2>&1 &
        server=$!
        for _ in $(seq 100); do grep -q listening "$work/server" && break; sleep 0.05; done
        timeout 120 "$build/bench/stream_bench" client "$addr" $port "$size" "$count" $poll >"$work/client" 2>&1 ||
            { cat "$work/client" "$work/server" >&2; echo "stream_compare: $tool failed" >&2; exit 1; }
        result=$(awk '$1 == "stream" {print $9}' "$work/client") ;;
    *)
        local cmd=rstream opts=()
        [ "$tool" = riostream ] && cmd=riostream
        [ "$tool" = tcp ] && opts=(-T s)
        "$cmd" "${opts[@]}" -b "$addr" -p $port -S "$size" -C "$count" >"$work/server" 2>&1 &
        server=$!
        sleep 0.3 # (rstream says nothing once it listens)
        timeout 120 "$cmd" "${opts[@]}" -s "$addr" -p $port -S "$size" -C "$count" >"$work/client" 2>&1 ||
            { cat "$work/client" "$work/server" >&2; echo "stream_compare: $tool failed" >&2; exit 1; }
        result=$(awk '$1 == "custom" {print $NF}' "$work/client") ;;
    esac
    timeout 30 tail --pid=$server -f /dev/null || { echo "stream_compare: $tool's server did not end" >&2; exit 1; }
    [[ $result =~ ^[0-9]+(\.[0-9]+)?$ ]] || { cat "$work/client" >&2; echo "stream_compare: $tool printed no result" >&2; exit 1; }
    echo "$result"
}

tools="stream stream_poll rstream riostream tcp asio_tcp"
for cfg in "64 1000" "65536 200"; do
    read -r size count <<<"$cfg"
    declare -A usec=()
    for tool in $tools; do one "$tool" "$size" "$count" >/dev/null; done # (untimed)
    for _ in $(seq "$repeats"); do
        for tool in $tools; do usec[$tool]+="$(one "$tool" "$size" "$count") "; done
    done
    echo "stream_compare: $size B x $count, median of $repeats (usec per transfer, Gb/s both ways, their time / ours event-driven):"
    ours=$(tr ' ' '\n' <<<"${usec[stream]}" | grep . | median)
    for tool in $tools; do
        m=$(tr ' ' '\n' <<<"${usec[$tool]}" | grep . | median)
        awk -v t="$tool" -v m="$m" -v s="$size" -v o="$ours" \
            'BEGIN {printf "  %-12s %10.2f us %8.3f Gb/s   x%.2f\n", t, m, s * 8 / (m * 1000), m / o}'
    done
    unset usec
done
