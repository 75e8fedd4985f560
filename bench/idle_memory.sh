#!/bin/bash
# idle_memory.sh BUILD ADDRESS N: what N idle established connections cost through rdmacm
# beyond raw librdmacm (bench/idle_memory_bench: the same server in both runs, so the
# difference is the client side's), per connection; and of that, the id's share (rdmacm's
# cm_id with librdmacm's own queue pair and CQs, as the raw run has).
set -euo pipefail
[ $# = 3 ] || { echo "usage: idle_memory.sh BUILD ADDRESS N" >&2; exit 2; }
build=$1 addr=$2 n=$3
# Raw librdmacm opens two completion channels per connection: room for them.
ulimit -n "$(ulimit -Hn)"
for side in raw ids ours defaults; do
    out=$("$build"/bench/idle_memory_bench "$addr" "$n" $side) || { echo "$out"; exit 1; }
    echo "$out"
    read -r rss anon heap fds <<<"$(awk '$1 == "idle" { print $5, $7, $9, $11 }' <<<"$out")"
    eval "${side}_rss=$rss ${side}_anon=$anon ${side}_heap=$heap ${side}_fds=$fds"
done
# shellcheck disable=SC2154
beyond() { # WHAT RAW... OURS...
    awk -v what="$1" -v r="$2 $3 $4 $5" -v o="$6 $7 $8 $9" 'BEGIN {
        split(r, a, " "); split(o, b, " ")
        printf "  %s: RSS %+.0f bytes, anonymous RSS %+.0f, heap %+.0f, fds %+.2f\n",
               what, b[1] - a[1], b[2] - a[2], b[3] - a[3], b[4] - a[4]
    }'
}
echo "idle connections ($n): rdmacm beyond raw librdmacm, per connection"
beyond "cm_id and queue_pair" "$raw_rss" "$raw_anon" "$raw_heap" "$raw_fds" "$ours_rss" "$ours_anon" "$ours_heap" "$ours_fds"
beyond "of which the cm_id" "$raw_rss" "$raw_anon" "$raw_heap" "$raw_fds" "$ids_rss" "$ids_anon" "$ids_heap" "$ids_fds"
# What the device maps for queue_pair_options' default of four buffers per work request.
beyond "defaults (4 buffers per work request)" "$raw_rss" "$raw_anon" "$raw_heap" "$raw_fds" "$defaults_rss" "$defaults_anon" "$defaults_heap" "$defaults_fds"
