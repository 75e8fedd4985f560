#!/bin/bash
# pair_bench.sh BUILD_DIR [REPEATS]: the stream's comparison (bench/stream_compare.sh: the
# stream beside rsockets, TCP and perftest, what a transfer costs, Beast over both) across
# the link between two hosts — run on both by tools/rdma-vm/run-pair (tools/bench). Side a
# runs it, on each device, against side b's address; its servers run on side b
# (bench/compare_lib.sh's serve_jobs). The link is clean (no fault): what crossing a link
# between two kernels changes, beside the single-host rows.
set -euo pipefail
build=$1 repeats=${2:-3}
dev=pair # (for compare_lib's fail)
# shellcheck source=bench/compare_lib.sh
. "$(dirname "$0")/compare_lib.sh"
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing # (bench/syscalls_of)
if [ "$RDMAVM_PAIR_SIDE" = b ]; then
    serve_jobs
    exit 0
fi
status=0
for dev in rxe0 siw0; do
    peer=RDMACM_PEER_ADDR_$dev
    echo "== $dev, across the link"
    # rstream's own counts, 64 B x 1000 and 64 KiB x 200: across the link a run of 1000 small
    # transfers lasts long enough to measure, and rsockets' siw runs stall more the more
    # transfers they make (3 of 3 runs of 10000 hung at b54b0d2: docs/benchmarks.md).
    "$(dirname "$0")/stream_compare.sh" "$build" "$dev" "${!peer}" "$repeats" 1000 200 || { status=1; break; }
done
: >"$RDMAVM_PAIR_DIR/jobs-done"
exit $status
