#!/bin/bash
# faults.sh BUILD_DIR: run by tools/rdma-vm/run-pair on both hosts (tests/pair/run.sh). Side b
# serves (the samples' echo_server and http_server on rxe0's and siw0's addresses); side a
# is the client. Every step is bounded; the first failure ends the side with its number.
#
# 1. A lossy, slow link: each host's side of both links drops 1 % and delays 20 ms
#    (link-fault netem), so each direction does. On each device: 200 echoes (echo_client:
#    every one checked, in order), 50 keep-alive HTTP requests over an rdmacm::stream
#    (http_client: every body checked), and rdma-core's ucmatose (2 connections, 10
#    messages each way, its own check) against our cmatose_server (siw's race R10 retried
#    as the samples test does: tests/support/r10.sh).
# 2. The server's host crashes (crash-host: no DREQ, no FIN) while side a has, on each
#    device, a stream writing without waiting for answers (bench/stream_bench) and an
#    echo_client (mostly waiting for an echo). The time from the crash to each one's end is
#    printed. The writer must end with the library's error (connection_reset: its sends
#    ran out of retries) within 60 s; the echo client must end (bounded by its own 30-s stall watch: a
#    receive alone is never told of a peer gone, docs/reliability.md). siw's connection is
#    TCP's: its detection is TCP's retransmission budget, set here by net.ipv4.tcp_retries2
#    (5: about 12.6 s of retransmissions; the default 15 takes about 15 minutes).
set -uo pipefail
build=$1
. "$(dirname "$0")/../support/r10.sh"
pair=$RDMAVM_PAIR_DIR
devices="rxe0 siw0"
say() { echo "$(date +%T.%N | cut -c1-12) $*"; }
await() { # await FILE SECS: until the peer writes FILE
    for _ in $(seq $(($2 * 10))); do [ -e "$pair/$1" ] && return 0; sleep 0.1; done
    say "no $1 from the peer within $2 s"
    return 1
}
addr() { local v=RDMACM_ADDR_$1; echo "${!v}"; }
peer() { local v=RDMACM_PEER_ADDR_$1; echo "${!v}"; }

for d in $devices; do link-fault "$d" netem loss 1% delay 20ms || exit 2; done

if [ "$RDMAVM_PAIR_SIDE" = b ]; then
    trap 'kill $(jobs -p) 2>/dev/null' EXIT # (servers: their output would hold the host open)
    for d in $devices; do
        "$build/samples/echo_server" "$(addr $d)" 7471 2>&1 | sed -u "s/^/$d echo_server: /" &
        "$build/samples/http_server" "$(addr $d)" 7472 2>&1 | sed -u "s/^/$d http_server: /" &
        "$build/samples/cmatose_server" "$(addr $d)" 7473 10 100 2>&1 | sed -u "s/^/$d cmatose_server: /" &
        "$build/bench/stream_bench" server "$(addr $d)" 7474 65536 100000000 2>&1 | sed -u "s/^/$d stream_bench: /" &
    done
    sleep 1
    : >"$pair/b.serving"
    await a.lossy-done 900 || exit 10
    await a.clients-running 60 || exit 11
    sleep 3 # (echoes flowing)
    say "crashing"
    : >"$pair/b.crashing"
    crash-host 0
fi

# Side a.
await b.serving 60 || exit 20
for d in $devices; do
    say "$d: lossy link: 200 echoes"
    timeout 300 "$build/samples/echo_client" "$(peer $d)" 7471 200 || { say "$d: echo_client failed"; exit 21; }
    say "$d: lossy link: 50 HTTP requests"
    timeout 300 "$build/samples/http_client" "$(peer $d)" 7472 50 || { say "$d: http_client failed"; exit 22; }
    say "$d: lossy link: ucmatose, 2 connections x 10 messages each way"
    for attempt in 1 2 3; do
        status=0
        out=$(timeout 120 ucmatose -s "$(peer $d)" -p 7473 -C 10 -S 100 -c 2 2>&1) || status=$?
        echo "$out"
        [ $status = 0 ] && break
        r10_retry $attempt "$out" || { say "$d: ucmatose failed (status $status)"; exit 23; }
    done
done
for d in $devices; do link-fault "$d" heal; done
: >"$pair/a.lossy-done"

sysctl -qw net.ipv4.tcp_retries2=5
# On each device: a writer (a stream writing 64 KiB transfers without waiting for answers:
# sends are in flight when the host goes) and an echo client (one message, then a wait for
# its echo: most of the time only a receive is waiting).
declare -A client=()
start() { # start NAME COMMAND...: in the background, bounded, its end time watched apart
    timeout 300 "${@:2}" >"/tmp/crash.$1" 2>&1 &
    client[$1]=$!
    (tail --pid="${client[$1]}" -f /dev/null; date +%s.%N >"/tmp/ended.$1") &
}
for d in $devices; do
    start "writer.$d" "$build/bench/stream_bench" client "$(peer $d)" 7474 65536 100000000
    start "echo.$d" "$build/samples/echo_client" "$(peer $d)" 7471 100000000
done
: >"$pair/a.clients-running"
await b.crashing 120 || exit 30
crashed=$(date +%s.%N)
status=0
for name in "${!client[@]}"; do
    wait "${client[$name]}"
    rc=$?
    for _ in $(seq 50); do [ -s "/tmp/ended.$name" ] && break; sleep 0.1; done
    after=$(awk -v e="$(cat "/tmp/ended.$name")" -v c="$crashed" 'BEGIN {printf "%.1f", e - c}')
    said=$(tail -n 1 "/tmp/crash.$name")
    say "$name: ended $after s after the crash, status $rc: $said"
    [ $rc != 0 ] && [ $rc != 124 ] || { say "$name: did not end with an error"; status=31; }
    # A writer learns of it from its sends: the library's error (the transport's retries),
    # within 60 s (docs/reliability.md: about 15 s on either device here).
    if [[ $name == writer.* ]]; then
        grep -q "Connection reset" "/tmp/crash.$name" || { say "$name: not the library's error"; status=32; }
        awk -v a="$after" 'BEGIN {exit !(a < 60)}' || { say "$name: later than 60 s"; status=33; }
    fi
done
exit $status
