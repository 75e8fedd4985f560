#!/bin/bash
# costs.sh BUILD ADDRESS DEVICE [BENCH...]: the deterministic costs per operation of each benchmark's
# phases, ours beside the raw librdmacm baseline measured in the same run (bench/costs.hpp):
# system calls counted by the kernel (a plain run) and user-space instructions counted by
# callgrind (a second run, each measured stretch dumped under its phase's name, every
# thread's instructions in it: collected from the start, zeroed when a stretch begins). Neither
# depends on the host's load: they repeat run to run where times swing ±40 % under TCG.
# Beside them the plain run's CPU time per operation (every thread's, user and system): a
# time, moving with the load, but what busy polling trades for its latency shows there.
# As root, where the RDMA devices are (the VM): mounts tracefs for the syscall counter.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: costs.sh BUILD ADDRESS DEVICE [BENCH...]  (default: every one)" >&2; exit 2; }
build=$1 addr=$2 dev=$3
shift 3
only=" $* "
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Sizes: small (callgrind runs ~50x slower); siw takes a few dozen QPs per process.
[ "$dev" = siw0 ] && rebalance=20 || rebalance=200
# A busy-polling run counts system calls only: its loop's instructions are the time it
# waits, not a cost of the operation (and valgrind runs one thread at a time).
benches=("migrate_bench $addr 10 10" "cm_events_bench $addr 200 3" "rebalance_bench $addr $rebalance"
    "send_bench $addr 1000 64 16" "send_bench $addr 1000 64 16 busy")

printf '%s: deterministic costs per operation, each phase vs raw in the same run\n' "$dev"
printf '  %-32s %8s %12s %10s %14s %10s %12s\n' phase ops syscalls/op "vs raw" instructions/op "vs raw" "cpu us/op"
for b in "${benches[@]}"; do
    name=${b%% *}
    [ "$only" = "  " ] || [[ $only == *" $name "* ]] || continue
    # Syscalls per op, and the op counts: a plain run.
    # shellcheck disable=SC2086
    "$build"/bench/$b >"$work/plain" || { cat "$work/plain"; exit 1; }
    # Instructions: the phases' dumps, added up by phase name.
    rm -f "$work"/cg.*
    if [[ $b == *" busy" ]]; then
        : >"$work/ir"
        cp "$work/plain" "$work/cg-run"
    else
        # shellcheck disable=SC2086
        valgrind --tool=callgrind --collect-atstart=yes --callgrind-out-file="$work/cg.%p" \
            "$build"/bench/$b >"$work/cg-run" 2>"$work/cg-err" || { cat "$work/cg-run" "$work/cg-err"; exit 1; }
        awk '/^desc: Trigger: Client Request: /{p=$NF} /^summary: /{ir[p]+=$2} END{for (k in ir) print k, ir[k]}' \
            "$work"/cg.*.* >"$work/ir"
    fi
    awk -v bench="$name" -v irfile="$work/ir" -v cgrun="$work/cg-run" '
        BEGIN {
            while ((getline l < irfile) > 0) { split(l, f, " "); ir[f[1]] = f[2] }
            # The op counts of the callgrind run (same sizes; a rebalance may move a few
            # more or fewer than the plain run).
            while ((getline l < cgrun) > 0)
                if (l ~ /^costs /) { split(l, f, " "); p = f[2]; sub(":", "", p); cg_ops[p] = f[3] }
        }
        /^costs / {
            p = $2; sub(":", "", p); ops = $3
            sys = ($6 ~ /^syscalls\/op/) ? $5 : "n/a"
            cpu = ($8 == "cpu_us/op") ? $7 : "n/a"
            iop = (p in ir && cg_ops[p] > 0) ? ir[p] / cg_ops[p] : -1
            order[++n] = p; O[p] = ops; S[p] = sys; I[p] = iop; C[p] = cpu
        }
        END {
            for (i = 1; i <= n; i++) {
                p = order[i]
                vs_s = (S["raw"] > 0 && S[p] != "n/a") ? sprintf("%.2fx", S[p] / S["raw"]) : "-"
                vs_i = (I["raw"] > 0 && I[p] >= 0) ? sprintf("%.2fx", I[p] / I["raw"]) : "-"
                printf "  %-32s %8d %12s %10s %14s %10s %12s\n", bench " " p, O[p], S[p], (p == "raw" ? "" : vs_s),
                       (I[p] >= 0 ? sprintf("%.0f", I[p]) : "n/a"), (p == "raw" ? "" : vs_i), C[p]
            }
        }' "$work/plain"
done
