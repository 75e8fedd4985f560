#!/bin/bash
# idle_memory.sh BUILD ADDRESS N: what N idle established connections cost through rdmacm
# beyond raw librdmacm (bench/idle_memory_bench: the same server in both runs, so the
# difference is the client side's), per connection.
set -euo pipefail
[ $# = 3 ] || { echo "usage: idle_memory.sh BUILD ADDRESS N" >&2; exit 2; }
build=$1 addr=$2 n=$3
for side in raw ours; do
    out=$("$build"/bench/idle_memory_bench "$addr" "$n" $side) || { echo "$out"; exit 1; }
    echo "$out"
    read -r rss anon heap fds <<<"$(awk '$1 == "idle" { print $5, $7, $9, $11 }' <<<"$out")"
    eval "${side}_rss=$rss ${side}_anon=$anon ${side}_heap=$heap ${side}_fds=$fds"
done
# shellcheck disable=SC2154
awk -v n="$n" -v r="$raw_rss $raw_anon $raw_heap $raw_fds" -v o="$ours_rss $ours_anon $ours_heap $ours_fds" 'BEGIN {
    split(r, a, " "); split(o, b, " ")
    printf "idle connections (%d): rdmacm beyond raw librdmacm, per connection: RSS %+.0f bytes, anonymous RSS %+.0f, heap %+.0f, fds %+.2f\n",
           n, b[1] - a[1], b[2] - a[2], b[3] - a[3], b[4] - a[4]
}'
