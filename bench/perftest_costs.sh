#!/bin/bash
# perftest_costs.sh BUILD DEVICE ADDRESS: the system calls of rdma-core's perftest (over
# rdma_cm; server and client together) per 64-byte operation, counted by the kernel as our
# benchmarks count theirs (bench/syscalls_of), and beside them its CPU time (a time, not a
# count: it moves with the load), to set beside our send_bench's (bench/costs.sh, both sides
# in one process): per round trip of ib_send_lat and per message of ib_send_bw, each
# sleeping on completion events (-e) and busy-polling (its default). Each is the difference
# of a long and a short run over the iterations between, so connection setup and teardown
# drop out (they repeat to the call). Not its instructions:
# under callgrind perftest's setup spins on gettimeofday for as long as the connection
# takes, a run's count moving by ~1.5 million — over 2,000 round trips, ±15 % of one; and a
# busy-polling loop's instructions are the time it waits, not a cost of the operation. As
# root, in the VM.
set -euo pipefail
[ $# = 3 ] || { echo "usage: perftest_costs.sh BUILD DEVICE ADDRESS" >&2; exit 2; }
build=$1 dev=$2 addr=$3
port=18517
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() { echo "perftest_costs: $dev: $1" >&2; shift; for f in "$@"; do echo "--- $f:" >&2; cat "$f" >&2; done; exit 1; }

# count N TOOL [FLAGS...]: TOOL with N iterations; prints both sides' system calls added up,
# and their CPU time (µs).
count() {
    local n=$1 tool=$2 side server status=0 total=0 cpu=0 c u
    shift 2
    for side in server client; do
        local args=("$tool" -R -d "$dev" -s 64 -F -p "$port" -n "$n" "$@")
        [ $side = client ] && args+=("$addr")
        timeout 120 "$build/bench/syscalls_of" "${args[@]}" >"$work/$side.out" 2>&1 &
        [ $side = server ] && { server=$!; sleep 1; }
    done
    wait $! || status=$?
    wait $server || status=$?
    [ $status = 0 ] || fail "$tool -n $n $*: exit status $status" "$work/server.out" "$work/client.out"
    for side in server client; do
        c=$(awk '/^syscalls [0-9]+$/ { v = $2 } END { print v }' "$work/$side.out")
        u=$(awk '/^cpu_us [0-9]+$/ { v = $2 } END { print v }' "$work/$side.out")
        [[ $c =~ ^[0-9]+$ && $u =~ ^[0-9]+$ ]] || fail "no count from the $side" "$work/$side.out"
        total=$((total + c)) cpu=$((cpu + u))
    done
    echo $total $cpu
}

# per_op WHAT SHORT LONG TOOL [FLAGS...]: prints TOOL's system calls and CPU time per operation.
per_op() {
    local what=$1 short=$2 long=$3 a b
    shift 3
    a=$(count "$short" "$@") # (one per statement: a failed count stops the script)
    b=$(count "$long" "$@")
    awk -v dev="$dev" -v what="$what" -v a="$a" -v b="$b" -v short="$short" -v long="$long" -v tool="$*" 'BEGIN {
        split(a, x, " "); split(b, y, " "); n = long - short
        printf "%s: %s, 64-byte %s, server and client: %.2f syscalls, %.2f cpu us (%d minus %d iterations)\n",
               dev, tool, what, (y[1] - x[1]) / n, (y[2] - x[2]) / n, long, short }'
}

# (Long enough that its CPU time outweighs the run-to-run spread of its connection setup's,
# which spins: tens of milliseconds.)
per_op "round trip" 1000 11000 ib_send_lat -e
per_op "round trip" 1000 11000 ib_send_lat
per_op "message" 2000 42000 ib_send_bw -e
per_op "message" 2000 42000 ib_send_bw
