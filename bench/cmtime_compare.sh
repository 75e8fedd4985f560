#!/bin/bash
# cmtime_compare.sh BUILD_DIR ADDRESS [CONNECTIONS] [REPEATS]: connection setup as seen by
# rdma-core's `cmtime` client (CONNECTIONS connections, default 1000) against cmtime's own
# server and against ours (bench/sharded_accept_server, doing per connection what cmtime's
# server does): without a pool (everything on the accepting thread), and sharded with 1 and
# 2 shards, side by side in one run. Each server first gets one untimed run, then they take
# turns REPEATS times (default 3). Prints cmtime's per-step totals (medians) and ours /
# cmtime's server per step: below 1 is faster. Only connect and disconnect involve the
# server.
#
# Every run must make every connection, or the script fails saying which run and showing
# both sides' output: cmtime's client counts a REJECTED, UNREACHABLE or CONNECT_ERROR as a
# completed connect (printing "event: ..."), so its output may hold nothing but its progress
# lines and its table; cmtime's server prints nothing unless a request fails, and must still
# be running at the end; ours must print "established N" on SIGTERM with N = CONNECTIONS.
set -euo pipefail
build=$1 addr=$2 connections=${3:-1000} repeats=${4:-3}
steps=("resolve addr" "resolve route" "connect" "disconnect")
port=7700
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing # (syscalls_of)

work=$(mktemp -d)
server_pid=
trap '[ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null; rm -rf "$work"' EXIT

# fail WHY: says so with both sides' output of the run, and stops.
fail() {
    echo "cmtime_compare: $*" >&2
    echo "--- server output:" >&2
    cat "$work/server" >&2
    echo "--- client output:" >&2
    cat "$work/client" >&2
    exit 1
}

# one_run SERVER RUN [N COUNT]: cmtime's client against SERVER (cmtime, or ours0/ours1/ours2:
# no pool, 1 or 2 shards) on a port of its own, CONNECTIONS connections; the client's output
# is left in $work/client. With N: N connections, and the server's system calls counted (COUNT
# syscalls: in $syscalls; bench/syscalls_of passes our TERM on) or its user-space
# instructions, every thread's (COUNT instructions: in $instructions; callgrind, its own
# messages kept out of the server's output, which is checked).
one_run() {
    local server=$1 run=$2 n=${3:-$connections} client_status=0 server_status=0 unexpected established
    local count=() start=0.5
    case ${4:-} in
        syscalls) count=("$build/bench/syscalls_of") ;;
        instructions)
            rm -f "$work"/cg.*
            count=(valgrind --tool=callgrind --callgrind-out-file="$work/cg.%p" --log-file="$work/valgrind")
            start=10 # (valgrind's start)
            ;;
    esac
    port=$((port + 1))
    # Bounded: past the client's 300 s a server is stuck (the status says 124).
    case $server in
        # Line-buffered: it is killed, and what it printed must not die in its buffer.
        cmtime) timeout 330 stdbuf -oL "${count[@]}" cmtime -b "$addr" -p "$port" >"$work/server" 2>&1 & ;;
        ours*) timeout 330 "${count[@]}" "$build/bench/sharded_accept_server" "$addr" "$port" "${server#ours}" \
            >"$work/server" 2>&1 & ;;
    esac
    server_pid=$!
    sleep $start
    timeout 300 cmtime -s "$addr" -p "$port" -c "$n" >"$work/client" 2>&1 || client_status=$?
    # timeout(1) passes the TERM on; ours then ends its connections and exits. A server that
    # is gone already is not an error here: its status, next, says how it ended.
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" || server_status=$?
    server_pid=
    case ${4:-} in
        syscalls)
            syscalls=$(sed -n 's/^syscalls \([0-9][0-9]*\)$/\1/p' "$work/server")
            [ -n "$syscalls" ] || fail "$run, server $server: no system call count"
            sed -i '/^syscalls [0-9][0-9]*$/d; /^cpu_us [0-9][0-9]*$/d' "$work/server"
            ;;
        instructions)
            instructions=$(cat "$work"/cg.* 2>/dev/null | awk '/^summary: / { n += $2 } END { print n + 0 }')
            [ "$instructions" -gt 0 ] || fail "$run, server $server: no instruction count ($(cat "$work/valgrind"))"
            ;;
    esac
    [ "$client_status" = 0 ] ||
        fail "$run, server $server: the cmtime client exited with status $client_status (124: it ran out of its 300 s)"
    # Any line but the progress lines, the table's head and its rows is a failure report.
    if unexpected=$(grep -vxE -e 'creating id|resolving address|resolving route|creating qp|connecting|disconnecting|destroying id' \
        -e 'step +total ms +max ms +min us +us / conn' -e '[a-z ]+: [ 0-9.]+' "$work/client"); then
        fail "$run, server $server: connections failed, the client says: $unexpected"
    fi
    case $server in
        cmtime)
            # 143: still serving when our TERM came; its output: nothing unless it failed a request.
            [ "$server_status" = 143 ] || fail "$run, server $server: it ended with status $server_status, not by our TERM (143)"
            [ ! -s "$work/server" ] || fail "$run, server $server: it reported failures"
            ;;
        ours*)
            [ "$server_status" = 0 ] || fail "$run, server $server: it exited with status $server_status"
            established=$(sed -n 's/^established \([0-9][0-9]*\)$/\1/p' "$work/server")
            [ -n "$established" ] || fail "$run, server $server: it printed no \"established N\" line"
            [ "$established" = "$n" ] ||
                fail "$run, server $server: $established connections established, not $n"
            ;;
    esac
}

# Warm-up: one untimed (but checked) run against each server, so that no side pays for
# first use (page cache, the kernel's CM and device state) in the timed runs.
for server in cmtime ours0 ours1 ours2; do one_run "$server" "warm-up"; done

declare -A totals
for r in $(seq "$repeats"); do
    for server in cmtime ours0 ours1 ours2; do
        one_run "$server" "run $r"
        for step in "${steps[@]}"; do
            ms=$(awk -F: -v s="$step" '{ name = $1; sub(/ +$/, "", name) } name == s { split($2, f, " "); print f[1] }' "$work/client")
            [[ $ms =~ ^[0-9]+(\.[0-9]+)?$ ]] || fail "run $r, server $server: no total for step \"$step\" in cmtime's table"
            totals[$server/$step]+="$ms "
        done
    done
done
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "connection setup: cmtime client, $connections connections, totals in ms (median of $repeats, all connections made in every run)"
printf '  %-14s %8s %8s %8s %8s %9s %9s %9s\n' step cmtime "no pool" "1 shard" "2 shards" "ratio np" "ratio 1" "ratio 2"
for step in "${steps[@]}"; do
    c=$(median "${totals[cmtime/$step]}") o0=$(median "${totals[ours0/$step]}")
    o1=$(median "${totals[ours1/$step]}") o2=$(median "${totals[ours2/$step]}")
    awk -v s="$step" -v c="$c" -v z="$o0" -v a="$o1" -v b="$o2" \
        'BEGIN { printf "  %-14s %8.1f %8.1f %8.1f %8.1f %9.2f %9.2f %9.2f\n", s, c, z, a, b, z / c, a / c, b / c }'
done
echo "  (ratio: ours / cmtime's server, below 1 is faster; goal for connect: <= 1.05 on 1 shard, < 1 on 2)"

# Deterministic costs: each server's system calls and user-space instructions per connection
# (connected, then disconnected by the client), as the difference of a run of N connections
# and one of half as many — setup and teardown drop out: system calls over CONNECTIONS,
# instructions over 20 (callgrind runs the server ~50x slower: the client's connects must
# not time out waiting for it).
declare -A costs
half=$((connections / 2))
for server in cmtime ours0 ours1 ours2; do
    for n in $half $connections; do
        one_run "$server" "system call count, $n connections" "$n" syscalls
        costs[$server/syscalls/$n]=$syscalls
    done
    for n in 10 20; do
        one_run "$server" "instruction count, $n connections" "$n" instructions
        costs[$server/instructions/$n]=$instructions
    done
done
# per SERVER WHAT SMALL LARGE FORMAT
per() { awk -v a="${costs[$1/$2/$3]}" -v b="${costs[$1/$2/$4]}" -v n=$(($4 - $3)) -v f="$5" \
    'BEGIN { printf f, (b - a) / n }'; }
printf '  %-14s %8s %8s %8s %8s   (the server'"'"'s, per connection: %s minus %s connections)\n' syscalls \
    "$(per cmtime syscalls $half $connections %.1f)" "$(per ours0 syscalls $half $connections %.1f)" \
    "$(per ours1 syscalls $half $connections %.1f)" "$(per ours2 syscalls $half $connections %.1f)" "$connections" "$half"
printf '  %-14s %8s %8s %8s %8s   (the server'"'"'s, every thread'"'"'s, per connection: 20 minus 10 connections)\n' \
    instructions "$(per cmtime instructions 10 20 %.0f)" "$(per ours0 instructions 10 20 %.0f)" \
    "$(per ours1 instructions 10 20 %.0f)" "$(per ours2 instructions 10 20 %.0f)"
echo "  (disconnect: cmtime's server destroys each QP and id on its disconnect thread before taking"
echo "   the next disconnect; ours destroys them off that path, so that row compares different work)"
