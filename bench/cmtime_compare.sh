#!/bin/bash
# cmtime_compare.sh BUILD_DIR ADDRESS [CONNECTIONS] [REPEATS]: connection setup as seen by
# rdma-core's `cmtime` client (CONNECTIONS connections, default 1000) against cmtime's own
# server and against ours (bench/sharded_accept_server, doing per connection what cmtime's
# server does): without a pool (everything on the accepting thread), and sharded with 1 and
# 2 shards, side by side in one run. Prints cmtime's
# per-step totals (medians of REPEATS runs, default 3) and ours / cmtime's server per step:
# below 1 is faster. Only connect and disconnect involve the server.
set -euo pipefail
build=$1 addr=$2 connections=${3:-1000} repeats=${4:-3}
steps=("resolve addr" "resolve route" "connect" "disconnect")
port=7700

declare -A totals
for _ in $(seq "$repeats"); do
    for server in cmtime ours0 ours1 ours2; do
        port=$((port + 1))
        case $server in
            cmtime) cmtime -b "$addr" -p "$port" >/dev/null 2>&1 & pid=$! ;;
            ours*) "$build/bench/sharded_accept_server" "$addr" "$port" "${server#ours}" >/dev/null 2>&1 & pid=$! ;;
        esac
        sleep 0.5
        table=$(timeout 300 cmtime -s "$addr" -p "$port" -c "$connections" 2>/dev/null | grep ': *[0-9]' || true)
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        for step in "${steps[@]}"; do
            ms=$(awk -F: -v s="$step" '{ name = $1; sub(/ +$/, "", name) } name == s { split($2, f, " "); print f[1] }' <<<"$table")
            totals[$server/$step]+="${ms:-nan} "
        done
    done
done
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "connection setup: cmtime client, $connections connections, totals in ms (median of $repeats)"
printf '  %-14s %8s %8s %8s %8s %9s %9s %9s\n' step cmtime "no pool" "1 shard" "2 shards" "ratio np" "ratio 1" "ratio 2"
for step in "${steps[@]}"; do
    c=$(median "${totals[cmtime/$step]}") o0=$(median "${totals[ours0/$step]}")
    o1=$(median "${totals[ours1/$step]}") o2=$(median "${totals[ours2/$step]}")
    awk -v s="$step" -v c="$c" -v z="$o0" -v a="$o1" -v b="$o2" \
        'BEGIN { printf "  %-14s %8.1f %8.1f %8.1f %8.1f %9.2f %9.2f %9.2f\n", s, c, z, a, b, z / c, a / c, b / c }'
done
echo "  (ratio: ours / cmtime's server, below 1 is faster; goal for connect: <= 1.05 on 1 shard, < 1 on 2)"
