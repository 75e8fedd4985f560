#!/bin/bash
# perftest_costs.sh BUILD DEVICE ADDRESS: the system calls of one 64-byte round trip of
# rdma-core's ib_send_lat -e (over rdma_cm, sleeping on completion events; server and client
# together), counted by the kernel as our benchmarks count theirs (bench/syscalls_of), to
# set beside our send_bench's event-mode round trip (bench/costs.sh, both sides in one
# process): the difference of a long and a short run over the iterations between, so
# connection setup and teardown drop out (they repeat to the call). Not its instructions:
# under callgrind perftest's setup spins on gettimeofday for as long as the connection takes,
# a run's count moving by ~1.5 million — over 2,000 round trips, ±15 % of one. As root, in
# the VM.
set -euo pipefail
[ $# = 3 ] || { echo "usage: perftest_costs.sh BUILD DEVICE ADDRESS" >&2; exit 2; }
build=$1 dev=$2 addr=$3
short=100 long=1100 port=18517
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() { echo "perftest_costs: $dev: $1" >&2; shift; for f in "$@"; do echo "--- $f:" >&2; cat "$f" >&2; done; exit 1; }

# count N: ib_send_lat -e, N iterations; prints both sides' system calls added up.
count() {
    local n=$1 side server status=0 total=0 c
    for side in server client; do
        local args=(ib_send_lat -R -d "$dev" -s 64 -F -e -p "$port" -n "$n")
        [ $side = client ] && args+=("$addr")
        timeout 120 "$build/bench/syscalls_of" "${args[@]}" >"$work/$side.out" 2>&1 &
        [ $side = server ] && { server=$!; sleep 1; }
    done
    wait $! || status=$?
    wait $server || status=$?
    [ $status = 0 ] || fail "ib_send_lat -e -n $n: exit status $status" "$work/server.out" "$work/client.out"
    for side in server client; do
        c=$(awk '/^syscalls [0-9]+$/ { v = $2 } END { print v }' "$work/$side.out")
        [[ $c =~ ^[0-9]+$ ]] || fail "no count from the $side" "$work/$side.out"
        total=$((total + c))
    done
    echo $total
}

a=$(count $short) # (one per statement: a failed count stops the script)
b=$(count $long)
awk -v dev="$dev" -v a="$a" -v b="$b" -v n=$((long - short)) 'BEGIN {
    printf "%s: ib_send_lat -e, 64-byte round trip, server and client: %.2f syscalls (%d minus %d iterations)\n",
           dev, (b - a) / n, n + '$short', '$short' }'
