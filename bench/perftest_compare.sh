#!/bin/bash
# perftest_compare.sh BUILD_DIR DEVICE ADDRESS [REPEATS]: our queue_pair send/receive
# (bench/send_bench) next to rdma-core's perftest (ib_send_lat, ib_send_bw over rdma_cm)
# on one device: one untimed run of each first, then measured alternately REPEATS times in
# this one run; prints the medians and the ratios (ours / perftest, for latency perftest /
# ours: above 1 means faster). perftest busy-polls its completion queue by default; with -e
# it sleeps on completion events: ours runs both ways too (queue_pair_options::poll_for),
# each beside its match. Any run that fails (either side
# of perftest, or send_bench) or prints no result stops the script, saying so: no median
# is taken over fewer runs than asked for.
set -euo pipefail
build=$1 dev=$2 addr=$3 repeats=${4:-3}
size=64 lat_iters=1000 bw_iters=20000 window=32

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# shellcheck source=bench/compare_lib.sh
. "$(dirname "$0")/compare_lib.sh" # (median, number, fail, perftest_run)

declare -A samples

# perftest KEY TOOL PORT [FLAGS...]: one run (bench/compare_lib.sh) of SIZE bytes; adds
# the result (field 5 of the client's SIZE line: t_typical for ib_send_lat, MsgRate for
# ib_send_bw) to samples[KEY], or with KEY "-" (the warm-up) only checks it.
perftest() {
    local key=$1 tool=$2 port=$3 value
    shift 3
    perftest_run "$work/client" "$tool" "$dev" "$addr" "$port" -s $size "$@" || exit 1
    value=$(awk '$1 == '$size' { v = $5 } END { print v }' "$work/client")
    number "$value" || fail "$tool $*: no result line in the client's output" "$work/client"
    [ "$key" = - ] || samples[$key]+="$value "
}

# ours KEY MODE: send_bench's latency and message rate ("latency_us P50 P99 msg_rate_mps RATE")
# in completion MODE (events or busy), added to samples[KEY_lat] and samples[KEY_rate], or
# with KEY "-" only checked.
ours() {
    local lat rate
    "$build/bench/send_bench" "$addr" $lat_iters $size $window "$2" >"$work/send_bench" 2>&1 ||
        fail "send_bench exited with status $?" "$work/send_bench"
    lat=$(awk '$1 == "latency_us" && $4 == "msg_rate_mps" { print $2 }' "$work/send_bench")
    rate=$(awk '$1 == "latency_us" && $4 == "msg_rate_mps" { print $5 }' "$work/send_bench")
    if ! number "$lat" || ! number "$rate"; then fail "send_bench printed no result line" "$work/send_bench"; fi
    [ "$1" = - ] && return
    samples[${1}_lat]+="$lat "
    samples[${1}_rate]+="$rate "
}

# pass [-]: ours in both modes, then perftest busy-polling and with events; with "-", the
# warm-up: every side once, untimed (checked, not kept), so that none pays for first use in
# the measured runs.
pass() {
    local warm=${1:-} mode flags
    ours "${warm:-ours_event}" events
    ours "${warm:-ours_poll}" busy
    for mode in poll event; do
        flags=(); [ $mode = event ] && flags=(-e)
        perftest "${warm:-${mode}_lat}" ib_send_lat 18515 -n $lat_iters "${flags[@]}"
        perftest "${warm:-${mode}_rate}" ib_send_bw 18516 -n $bw_iters "${flags[@]}"
    done
}
pass -
for _ in $(seq "$repeats"); do pass; done

m() { tr ' ' '\n' <<<"${samples[$1]}" | grep . | median; }
# The median and the spread of KEY's runs: "MEDIAN (MIN-MAX)".
ms() { echo "$(m "$1") ($(tr ' ' '\n' <<<"${samples[$1]}" | grep . | sort -g | sed -n '1p;$p' | paste -sd-))"; }
printf '%s: %s-byte send/receive, medians of %s runs (after one warm-up run each; perftest runs hung and run again: %s)\n' \
    "$dev" $size "$repeats" $perftest_hung
printf '  %-38s %24s %24s\n' "" "latency us (min-max)" "msg rate Mpps (min-max)"
printf '  %-38s %24s %24s\n' "asio-rdmacm queue_pair (events)" "$(ms ours_event_lat)" "$(ms ours_event_rate)"
printf '  %-38s %24s %24s\n' "perftest -e (events)" "$(ms event_lat)" "$(ms event_rate)"
printf '  %-38s %24s %24s\n' "asio-rdmacm queue_pair (busy_polling)" "$(ms ours_poll_lat)" "$(ms ours_poll_rate)"
printf '  %-38s %24s %24s\n' "perftest (busy polling)" "$(ms poll_lat)" "$(ms poll_rate)"
awk -v ol="$(m ours_event_lat)" -v or="$(m ours_event_rate)" -v el="$(m event_lat)" -v er="$(m event_rate)" \
    -v opl="$(m ours_poll_lat)" -v opr="$(m ours_poll_rate)" -v pl="$(m poll_lat)" -v pr="$(m poll_rate)" 'BEGIN {
    printf "  events vs perftest -e:       latency %.2f, msg rate %.2f (goal >= 0.9)\n", el / ol, or / er
    printf "  busy_polling vs perftest:    latency %.2f, msg rate %.2f (goal >= 0.9)\n", pl / opl, opr / pr }'
