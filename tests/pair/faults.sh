#!/bin/bash
# faults.sh BUILD_DIR [ECHOES]: run on both hosts of tools/rdma-vm/run-pair by tools/test.
# Side b serves (the samples' sharded_echo_server, http_server and cmatose_server, and
# bench/stream_bench, on rxe0's and siw0's addresses); side a is the client. Every step is
# bounded; the first failure ends the side with its number.
#
# 1. A lossy, slow link: each host's side of both links drops 1 % and delays 20 ms
#    (link-fault netem), so each direction does. On both devices at once: churn with moves
#    — 4 clients, each making 3 connections one after the other, each of ECHOES echoes
#    (default 100: 1,200 per device; tools/test --long: 834, 10,008) — against a
#    sharded_echo_server of 4 shards that moves every connection on to the next shard every
#    250 ms (echo_client checks every echo, in order; the server must have moved some);
#    then 50 keep-alive HTTP requests over an rdmacm::stream (http_client: every body
#    checked), and rdma-core's ucmatose (2 connections, 10 messages each way, its own
#    check) against our cmatose_server (siw's race R10 retried, up to 5 times here, as the
#    samples test does: tests/support/r10.sh).
# 2. Partitions (link-fault partition on a's side of both links: nothing passes either
#    way, the carrier up), the links otherwise delaying 20 ms:
#    - shorter than the transports' retry budget (2 s asked; its length, with the faults'
#      own time, printed: beside two CPU hogs a 5-s one outlasted siw's, TCP's 12.6 s of
#      back-off with tcp_retries2 5), under 300 echoes per device: the transports'
#      retransmissions carry the traffic on once it heals; every echo back once, in order
#      (echo_client's check);
#    - longer (until both sides were told, at most 90 s), with an http_client on a asking
#      b's http_server every 500 ms: both ends must end that connection with an error within
#      60 s — each by its keep-alive's probe (both probe every 5 s) or by a request's or
#      response's retries — each printed with its time; healed, the server serves a new
#      client.
# 3. Side b's host crashes (crash-host: no DREQ, no FIN). Side a has, on each device, a
#    stream writing 64 KiB transfers without waiting for answers (bench/stream_bench) and
#    an echo_client connected to b's servers — and on rxe a second writer whose ACK
#    time-out is 2^14 × 4.096 µs (67 ms, stream_options::ack_timeout 14); side b has an
#    http_client on each device connected to a's http_server, asking every 500 ms (the
#    server mostly waiting to read). The links delay 20 ms each way and lose nothing: a
#    path between hosts, on which a writer's sends are in flight when the peer goes. The
#    time from the crash to each end is printed.
#    - The server's host gone: a writer must end with the library's error
#      (connection_reset: its sends ran out of retries) within 60 s, the one with the short
#      ACK time-out within 10 s; the echo client with an error (at the latest by its own
#      30-s stall watch: a receive alone is never told of a peer gone, T16).
#    - The client's host gone: a's http_server, whose streams probe an idle peer every 5 s
#      (stream_options::keep_alive), must end each of those connections with an error
#      within 60 s, and then still serve: a new client on a itself, 5 requests.
# Nothing leaks: after the lossy link (b's echo and HTTP servers), after the long partition
# (b's http_server) and after the crash (a's), each server must be back, within 30 s, to
# what it held listening: its CM ids, queue pairs, completion queues and memory regions as
# the kernel counts them (rdma res), and its open descriptors.
# siw's connection is TCP's: its detection is TCP's retransmission budget, set here on both
# hosts by net.ipv4.tcp_retries2 (5: about 12.6 s of retransmissions; the default 15 takes
# about 15 minutes).
set -uo pipefail
build=$1
echoes=${2:-100}
# shellcheck source=tests/support/r10.sh
. "$(dirname "$0")/../support/r10.sh"
pair=$RDMAVM_PAIR_DIR
devices="rxe0 siw0"
say() { echo "$(date +%T.%N | cut -c1-12) $*"; }
await() { # await FILE SECS: until the peer writes FILE
    for _ in $(seq $(($2 * 10))); do [ -e "$pair/$1" ] && return 0; sleep 0.1; done
    say "no $1 from the peer within $2 s"
    return 1
}
# await_output FILE TEXT SECS: until FILE (a program's output) says TEXT.
await_output() {
    for _ in $(seq $(($3 * 10))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    say "$1: no \"$2\" within $3 s"
    return 1
}
addr() { local v=RDMACM_ADDR_$1; echo "${!v}"; }
peer() { local v=RDMACM_PEER_ADDR_$1; echo "${!v}"; }

for d in $devices; do link-fault "$d" netem loss 1% delay 20ms || exit 2; done
sysctl -qw net.ipv4.tcp_retries2=5
# seconds FROM TO: TO - FROM (times as date +%s.%N prints them), to a tenth; since FILE and
# since_time TIME: the seconds since the time FILE holds, or since TIME; under SECONDS
# LIMIT: whether SECONDS < LIMIT.
seconds() { awk -v c="$1" -v e="$2" 'BEGIN {printf "%.1f", e - c}'; }
since() { since_time "$(cat "$1")"; }
since_time() { seconds "$1" "$(date +%s.%N)"; }
under() { awk -v a="$1" -v l="$2" 'BEGIN {exit !(a < l)}'; }
# start NAME COMMAND...: in the background, bounded (300 s); its output in /tmp/run.NAME, the
# time it ended in /tmp/ended.NAME (its own clock: the clients are watched apart), its pid in
# client[NAME].
declare -A client=()
start() {
    (
        timeout 300 "${@:2}" >"/tmp/run.$1" 2>&1
        rc=$?
        date +%s.%N >"/tmp/ended.$1"
        exit $rc
    ) >/dev/null 2>&1 &
    client[$1]=$!
}

# holds PID: what a process holds, as the kernel counts it (rdma res: its CM ids, queue
# pairs, completion queues, memory regions) and its open descriptors; false (saying why) if
# a count cannot be read.
holds() {
    local r out counts=""
    for r in cm_id qp cq mr; do
        out=$(rdma res show "$r" pid "$1") || { say "rdma res show $r pid $1 failed" >&2; return 1; }
        counts+="$(grep -c . <<<"$out") ${r}s, "
    done
    [ -d "/proc/$1/fd" ] || { say "no process $1" >&2; return 1; }
    echo "$counts$(find "/proc/$1/fd" -mindepth 1 | wc -l) fds"
}
# server_pid NAME ADDRESS PORT: the pid of the sample NAME serving ADDRESS PORT; false
# unless there is exactly one.
server_pid() {
    local p
    p=$(pgrep -f "/samples/$1 $2 $3( |\$)")
    [[ $p =~ ^[0-9]+$ ]] || { say "$1 $2 $3: not one process: ${p:-none}" >&2; return 1; }
    echo "$p"
}
# listening_holds PID: what the server holds listening, before any client: the same twice,
# 1 s apart, and its listener's CM id among it.
listening_holds() {
    local a b
    a=$(holds "$1") && sleep 1 && b=$(holds "$1") || return 1
    [ "$a" = "$b" ] || { say "pid $1 is still changing: $a, then $b" >&2; return 1; }
    [[ $a != "0 cm_ids"* ]] || { say "pid $1 holds no CM id listening: $a" >&2; return 1; }
    echo "$a"
}
# settles NAME PID HELD: whether the process NAME (PID) is back to holding HELD (what it
# held listening) within 30 s: its connections' ids are destroyed off their contexts'
# threads, a little after they close. The time it took is printed.
settles() {
    local now start
    start=$(date +%s.%N)
    for _ in $(seq 150); do
        now=$(holds "$2") || return 1
        [ "$now" = "$3" ] && { say "$1: back to what it held listening ($now) after $(since_time "$start") s"; return 0; }
        sleep 0.2
    done
    say "$1: leaked: holds $now; listening, it held $3"
    return 1
}

trap 'pkill -P $$ 2>/dev/null' EXIT # (every server and its tee: they would hold the host's output open)
# serve NAME COMMAND...: its output printed with NAME before each line, and kept.
serve() { "${@:2}" 2>&1 | tee "/tmp/$1" | sed -u "s/^/$1: /" & }

if [ "$RDMAVM_PAIR_SIDE" = b ]; then
    for d in $devices; do
        serve "echo_server.$d" "$build/samples/sharded_echo_server" "$(addr $d)" 7471 4 250
        serve "http_server.$d" "$build/samples/http_server" "$(addr $d)" 7472
        serve "cmatose_server.$d" "$build/samples/cmatose_server" "$(addr $d)" 7473 10 100
        serve "stream_bench.$d" "$build/bench/stream_bench" server "$(addr $d)" 7474 65536 100000000
    done
    serve "stream_bench_ack.rxe0" "$build/bench/stream_bench" server "$(addr rxe0)" 7476 65536 100000000
    for d in $devices; do
        for s in echo_server http_server cmatose_server stream_bench; do
            await_output "/tmp/$s.$d" listening 60 || exit 10
        done
    done
    await_output /tmp/stream_bench_ack.rxe0 listening 60 || exit 10
    declare -A pid=() held=()
    for d in $devices; do
        pid[echo.$d]=$(server_pid sharded_echo_server "$(addr $d)" 7471) || exit 7
        pid[http.$d]=$(server_pid http_server "$(addr $d)" 7472) || exit 7
        for s in echo http; do held[$s.$d]=$(listening_holds "${pid[$s.$d]}") || exit 7; done
    done
    : >"$pair/b.serving"
    await a.lossy-done 1800 || exit 11
    for d in $devices; do # (the rotation moved connections under the churn)
        rotated=$(grep "moves made" "/tmp/echo_server.$d" | tail -n 1)
        say "echo_server.$d: ${rotated:-no rebalance reported}"
        [[ $rotated =~ rebalances,\ [1-9][0-9]*\ moves ]] || exit 19
        # Every connection of the churn, the lossy HTTP one too, left nothing behind.
        for s in echo http; do settles "${s}_server.$d" "${pid[$s.$d]}" "${held[$s.$d]}" || exit 9; done
    done
    for d in $devices; do link-fault "$d" netem delay 20ms || exit 12; done
    : >"$pair/b.delay-only"
    # The long partition: this side's http_server ends its client's connection with an
    # error (its line "server: connection N: WHAT"; by the keep-alive's probe, or a
    # response's retries); the time from when this side saw the partition begin.
    await a.partitioning 300 || exit 17
    date +%s.%N >/tmp/partitioned
    for d in $devices; do # (the leak check sees a connection: its client's is open)
        now=$(holds "${pid[http.$d]}") || exit 6
        say "http_server.$d: with its client connected it holds $now"
        [ "$now" != "${held[http.$d]}" ] || { say "http_server.$d: a connection makes no difference to the check"; exit 6; }
    done
    declare -A errors_before=() # (the lossy step's connection ended long before)
    for d in $devices; do errors_before[$d]=$(grep -c "server: connection [0-9]*: " "/tmp/http_server.$d"); done
    for d in $devices; do
        for _ in $(seq 900); do
            [ "$(grep -c "server: connection [0-9]*: " "/tmp/http_server.$d")" -gt "${errors_before[$d]}" ] && break
            sleep 0.1
        done
        [ "$(grep -c "server: connection [0-9]*: " "/tmp/http_server.$d")" -gt "${errors_before[$d]}" ] ||
            { say "http_server.$d: its partitioned client's connection still open after 90 s"; exit 18; }
        after=$(since /tmp/partitioned)
        say "http_server.$d: its partitioned client's connection ended $after s after the partition:" \
            "$(grep "server: connection [0-9]*: " "/tmp/http_server.$d" | tail -n 1)"
        under "$after" 60 || { say "http_server.$d: later than 60 s"; exit 14; }
    done
    : >"$pair/b.partition-told"
    await a.serving 300 || exit 15
    # The partitioned connection and the healed client's left nothing behind.
    for d in $devices; do settles "http_server.$d" "${pid[http.$d]}" "${held[http.$d]}" || exit 8; done
    for d in $devices; do
        timeout 300 "$build/samples/http_client" "$(peer $d)" 7475 100000000 500 >"/tmp/idle.$d" 2>&1 &
    done
    for d in $devices; do await_output "/tmp/idle.$d" 'client: connected to' 120 || exit 16; done
    : >"$pair/b.clients-connected"
    await a.clients-connected 120 || exit 13
    sleep 3 # (echoes and transfers flowing)
    say "crashing"
    : >"$pair/b.crashing"
    crash-host 0
    exit 14 # (the reset did not happen)
fi

# Side a.
for d in $devices; do serve "http_server.$d" "$build/samples/http_server" "$(addr $d)" 7475; done
for d in $devices; do await_output "/tmp/http_server.$d" listening 60 || exit 19; done
declare -A pid=() held=()
for d in $devices; do
    pid[$d]=$(server_pid http_server "$(addr $d)" 7475) || exit 26
    held[$d]=$(listening_holds "${pid[$d]}") || exit 26
done
await b.serving 120 || exit 20
# lossy DEVICE: the lossy link's steps on one device; returns the failed step's number.
lossy() {
    local d=$1 c attempt status out
    say "$d: lossy link: 4 clients x 3 connections x $echoes echoes, the server moving them"
    local -a churn=()
    for c in 1 2 3 4; do
        (for _ in 1 2 3; do timeout 600 "$build/samples/echo_client" "$(peer $d)" 7471 "$echoes" || exit 1; done) &
        churn+=($!)
    done
    for c in "${churn[@]}"; do wait "$c" || { say "$d: an echo_client failed"; return 21; }; done
    say "$d: lossy link: 50 HTTP requests"
    timeout 300 "$build/samples/http_client" "$(peer $d)" 7472 50 || { say "$d: http_client failed"; return 22; }
    say "$d: lossy link: ucmatose, 2 connections x 10 messages each way"
    # (The link's delay widens siw's race; up to 6 tries, each retry printed.)
    for attempt in 1 2 3 4 5 6; do
        status=0
        out=$(timeout 60 stdbuf -oL ucmatose -s "$(peer $d)" -p 7473 -C 10 -S 100 -c 2 2>&1) || status=$?
        echo "$out"
        [ $status = 0 ] && return 0
        r10_retry $attempt "$out" 6 || { say "$d: ucmatose failed (status $status)"; return 23; }
    done
}
declare -A lossy_run=()
for d in $devices; do
    lossy "$d" >"/tmp/lossy.$d" 2>&1 &
    lossy_run[$d]=$!
done
for d in $devices; do
    wait "${lossy_run[$d]}"
    status=$?
    sed "s/^/$d: /" "/tmp/lossy.$d"
    [ $status = 0 ] || exit $status
done
for d in $devices; do link-fault "$d" netem delay 20ms || exit 24; done
: >"$pair/a.lossy-done"
await b.delay-only 240 || exit 25 # (b's leak checks first: up to 30 s each)

partition() { for d in $devices; do link-fault "$d" partition || exit 50; done; }
heal() { for d in $devices; do link-fault "$d" netem delay 20ms || exit 51; done; }
say "a partition shorter than the retry budget: 2 s, under 300 echoes per device"
declare -A short=()
for d in $devices; do
    timeout 120 "$build/samples/echo_client" "$(peer $d)" 7471 300 >"/tmp/short.$d" 2>&1 &
    short[$d]=$!
done
for d in $devices; do await_output "/tmp/short.$d" 'client: connected to' 60 || exit 52; done
sleep 1 # (echoes flowing)
partition_began=$(date +%s.%N)
partition
sleep 2
heal
say "the short partition lasted $(seconds "$partition_began" "$(date +%s.%N)") s"
for d in $devices; do
    wait "${short[$d]}" || { say "$d: echo_client across the short partition failed: $(tail -n 3 "/tmp/short.$d")"; exit 53; }
    say "$d: across the short partition: $(grep echoes "/tmp/short.$d")"
done

say "a partition longer than the retry budget, an http_client asking every 500 ms"
for d in $devices; do start "long.$d" "$build/samples/http_client" "$(peer $d)" 7472 100000000 500; done
for d in $devices; do await_output "/tmp/run.long.$d" 'client: connected to' 120 || exit 54; done
sleep 1 # (asking)
: >"$pair/a.partitioning"
partition
date +%s.%N >/tmp/partitioned
status=0
for d in $devices; do
    wait "${client[long.$d]}"
    rc=$?
    unset "client[long.$d]"
    after=$(seconds "$(cat /tmp/partitioned)" "$(cat "/tmp/ended.long.$d")")
    say "$d: http_client ended $after s after the partition, status $rc: $(tail -n 1 "/tmp/run.long.$d")"
    [ $rc != 0 ] && [ $rc != 124 ] || { say "$d: http_client did not end with an error"; status=55; }
    under "$after" 60 || { say "$d: http_client later than 60 s"; status=56; }
done
await b.partition-told 120 || status=57
heal
[ $status = 0 ] || exit $status
for d in $devices; do
    timeout 60 "$build/samples/http_client" "$(peer $d)" 7472 5 || { say "$d: healed, b's http_server no longer serves"; exit 58; }
done

: >"$pair/a.serving"
for d in $devices; do
    start "writer.$d" "$build/bench/stream_bench" client "$(peer $d)" 7474 65536 100000000
    start "echo.$d" "$build/samples/echo_client" "$(peer $d)" 7471 100000000
done
start "writer_ack14.rxe0" "$build/bench/stream_bench" client "$(peer rxe0)" 7476 65536 100000000 0 262144 14
for name in writer.rxe0 writer.siw0 writer_ack14.rxe0; do
    await_output "/tmp/run.$name" '^connected$' 120 || exit 30
done
for d in $devices; do await_output "/tmp/run.echo.$d" 'client: connected to' 120 || exit 31; done
await b.clients-connected 240 || exit 38
: >"$pair/a.clients-connected"
declare -A closed_before=()
for d in $devices; do closed_before[$d]=$(grep -c "closed after" "/tmp/http_server.$d"); done
await b.crashing 120 || exit 32
crashed=$(date +%s.%N)
status=0
# The server's side: each connection of b's idle client ends with an error (the keep-alive's
# probe ran out of retries), and is closed; looked at every 0.1 s.
declare -A closed_at=()
for _ in $(seq 900); do
    for d in $devices; do
        [ -z "${closed_at[$d]:-}" ] && [ "$(grep -c "closed after" "/tmp/http_server.$d")" -gt "${closed_before[$d]}" ] &&
            closed_at[$d]=$(date +%s.%N)
    done
    [ ${#closed_at[@]} = 2 ] && break
    sleep 0.1
done
for d in $devices; do
    if [ -z "${closed_at[$d]:-}" ]; then
        say "http_server.$d: its crashed client's connection still open after 90 s"
        status=40
        continue
    fi
    after=$(seconds "$crashed" "${closed_at[$d]}")
    say "http_server.$d: its crashed client's connection closed $after s after the crash:" \
        "$(grep "server: connection" "/tmp/http_server.$d" | tr '\n' ' ')"
    grep -q "server: connection [0-9]*: " "/tmp/http_server.$d" || { say "http_server.$d: not with an error"; status=41; }
    under "$after" 60 || { say "http_server.$d: later than 60 s"; status=42; }
    # ... and it serves the others.
    timeout 60 "$build/samples/http_client" "$(addr $d)" 7475 5 || { say "http_server.$d: no longer serves"; status=43; }
    # The crashed client's connection and the new one left nothing behind.
    settles "http_server.$d" "${pid[$d]}" "${held[$d]}" || status=44
done
for name in "${!client[@]}"; do
    wait "${client[$name]}"
    rc=$?
    if [ ! -s "/tmp/ended.$name" ]; then
        say "$name: its end was not recorded"
        status=33
        continue
    fi
    after=$(seconds "$crashed" "$(cat "/tmp/ended.$name")")
    say "$name: ended $after s after the crash, status $rc: $(tail -n 1 "/tmp/run.$name")"
    under "$after" 0 && { say "$name: ended before the crash"; status=34; }
    [ $rc != 0 ] && [ $rc != 124 ] || { say "$name: did not end with an error"; status=35; }
    # A writer learns of it from its sends: the library's error (the transport's retries),
    # within 60 s (docs/reliability.md: about 15 s on either device here).
    if [[ $name == writer* ]]; then
        grep -q "Connection reset" "/tmp/run.$name" || { say "$name: not the library's error"; status=36; }
        under "$after" 60 || { say "$name: later than 60 s"; status=37; }
    fi
    if [[ $name == writer_ack14.* ]]; then
        under "$after" 10 || { say "$name: later than 10 s"; status=39; }
    fi
done
exit $status
