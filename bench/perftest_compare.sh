#!/bin/bash
# perftest_compare.sh BUILD_DIR DEVICE ADDRESS [REPEATS]: our queue_pair send/receive
# (bench/send_bench) next to rdma-core's perftest (ib_send_lat, ib_send_bw over rdma_cm)
# on one device, measured alternately REPEATS times in this one run; prints the medians
# and the ratios (ours / perftest, for latency perftest / ours: above 1 means faster).
# perftest busy-polls its completion queue by default; with -e it sleeps on completion
# events as we do: both are shown.
set -euo pipefail
build=$1 dev=$2 addr=$3 repeats=${4:-3}
size=64 lat_iters=1000 bw_iters=20000 window=32

median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

# perftest TOOL PORT [FLAGS...]: server and client on $addr; prints the client's last line.
perftest() {
    local tool=$1 port=$2; shift 2
    timeout 60 "$tool" -R -d "$dev" -s $size -F -p "$port" "$@" >/dev/null 2>&1 &
    local server=$!
    sleep 1
    timeout 60 "$tool" -R -d "$dev" -s $size -F -p "$port" "$@" "$addr" | awk '$1 == '$size' {line=$0} END {print line}'
    wait $server || true
}

declare -A samples
for r in $(seq "$repeats"); do
    read -r _ lat _ _ rate < <("$build/bench/send_bench" "$addr" $lat_iters $size $window)
    samples[ours_lat]+="$lat "
    samples[ours_rate]+="$rate "
    for mode in poll event; do
        flags=(); [ $mode = event ] && flags=(-e)
        samples[${mode}_lat]+="$(perftest ib_send_lat 18515 -n $lat_iters "${flags[@]}" | awk '{print $5}') "
        samples[${mode}_rate]+="$(perftest ib_send_bw 18516 -n $bw_iters "${flags[@]}" | awk '{print $5}') "
    done
done
m() { tr ' ' '\n' <<<"${samples[$1]}" | grep . | median; }
printf '%s: %s-byte send/receive, medians of %s runs\n' "$dev" $size "$repeats"
printf '  %-34s %16s %14s\n' "" "latency us" "msg rate Mpps"
printf '  %-34s %16s %14s\n' "asio-rdmacm queue_pair (events)" "$(m ours_lat)" "$(m ours_rate)"
printf '  %-34s %16s %14s\n' "perftest -e (events)" "$(m event_lat)" "$(m event_rate)"
printf '  %-34s %16s %14s\n' "perftest (busy polling)" "$(m poll_lat)" "$(m poll_rate)"
awk -v ol="$(m ours_lat)" -v or="$(m ours_rate)" -v el="$(m event_lat)" -v er="$(m event_rate)" \
    -v pl="$(m poll_lat)" -v pr="$(m poll_rate)" 'BEGIN {
    printf "  ratio vs perftest -e:  latency %.2f, msg rate %.2f (goal >= 0.9)\n", el / ol, or / er
    printf "  ratio vs perftest:     latency %.2f, msg rate %.2f\n", pl / ol, or / pr }'
