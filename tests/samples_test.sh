#!/bin/bash
# The co_await samples on the test device: a client gets the server's greeting, the
# server sees it disconnect, and SIGINT stops the server cleanly. Bounded in time.
set -euo pipefail
samples=$1
addr_var=RDMACM_ADDR_${RDMACM_TEST_DEVICE:?run through ctest}
addr=${!addr_var:?device $RDMACM_TEST_DEVICE not reachable}
out=$(mktemp)
trap 'rm -f "$out"; kill $server 2>/dev/null || true' EXIT
timeout 60 "$samples/cm_server" "$addr" 0 >"$out" 2>&1 & server=$!
for _ in $(seq 50); do grep -q listening "$out" && break; sleep 0.1; done
port=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$out")
[ -n "$port" ] || { cat "$out"; echo "server did not start"; exit 1; }
client=$(timeout 30 "$samples/cm_client" "$addr" "$port" "sample test")
echo "$client"
grep -q 'server says "welcome, client 1"' <<<"$client"
grep -q 'DISCONNECTED' <<<"$client"
sleep 0.2
kill -INT $server
wait $server
cat "$out"
grep -q 'says "sample test"' "$out"
grep -q 'connection 1 closed' "$out"
grep -q 'stopped cleanly' "$out"

# An established connection moves from thread A to thread B and carries on there.
migrate=$(timeout 60 "$samples/migrate_demo" "$addr")
echo "$migrate"
grep -q '^\[thread A\] client: RDMA_CM_EVENT_ESTABLISHED' <<<"$migrate"
grep -q '^\[thread B\] client: migrated' <<<"$migrate"
grep -q '^\[thread B\] client: RDMA_CM_EVENT_DISCONNECTED' <<<"$migrate"
grep -q '^\[thread B\] client: disconnected' <<<"$migrate"
grep -q '^\[thread M\] done' <<<"$migrate"
