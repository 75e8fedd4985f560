#!/bin/bash
# The samples on the test device, as a user runs them: the hello pair, the co_await CM server and client
# (greeting, disconnect, SIGINT stops the server cleanly), the live migration demo, the
# echo client and server over send/receive, the HTTP server and client (Beast over a stream),
# a line protocol (async_read_until over a stream),
# the sharded echo server and the rebalance demo,
# and rdma-core's ucmatose and cmtime clients against our cmatose_server. Bounded in time.
# One kernel race is retried, named and bounded (ucmatose on siw, below); nothing else is.
set -euo pipefail
samples=$1
addr_var=RDMACM_ADDR_${RDMACM_TEST_DEVICE:?run through ctest}
addr=${!addr_var:?device $RDMACM_TEST_DEVICE not reachable}
out=$(mktemp)
trap 'rm -f "$out"; kill $server 2>/dev/null || true' EXIT
# (--foreground: timeout passes a SIGINT on to the server once; otherwise it sends it to its
# whole process group as well, and the second one, arriving after the server's signal
# handler is gone, killed a server that had stopped cleanly: status 130, under a CPU hog.)
timeout --foreground 60 "$samples/cm_server" "$addr" 0 >"$out" 2>&1 & server=$!
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

# Starts "$@" (a server printing "listening on ADDRESS:PORT") in the background, its
# output in $out, and sets $port and $server. Its bound is well beyond its clients' (a
# loaded machine under ASan runs the sharded echo part for over a minute).
start_server() {
    timeout --foreground 240 "$@" >"$out" 2>&1 & server=$!
    for _ in $(seq 50); do grep -q listening "$out" && break; sleep 0.1; done
    port=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$out")
    [ -n "$port" ] || { cat "$out"; echo "server did not start"; exit 1; }
}
# Stops the server (SIGINT) and checks it stopped cleanly; what it printed is shown
# whatever happened (it may have ended already: its status says how).
stop_server() {
    sleep 0.2
    kill -INT $server 2>/dev/null || echo "the server had ended already"
    local status=0
    wait $server || status=$?
    cat "$out"
    [ $status = 0 ] || { echo "server exit status $status (124: its time limit)"; exit 1; }
    grep -q 'stopped cleanly' "$out"
}

# The hello pair (the README's first program): the greeting comes back, twice over (two
# clients, one after the other), and the server stops cleanly.
start_server "$samples/hello_server" "$addr" 0
for name in "sample test" second; do
    hello=$(timeout 60 "$samples/hello_client" "$addr" "$port" "$name")
    echo "$hello"
    grep -qx "client: hello, $name" <<<"$hello"
    grep -qx 'client: disconnected' <<<"$hello"
done
stop_server
grep -q 'a message from sample test' "$out"
grep -q 'a message from second' "$out"

# The echo sample: every message comes back intact over send/receive.
start_server "$samples/echo_server" "$addr" 0
echo_out=$(timeout 30 "$samples/echo_client" "$addr" "$port" 200 256)
echo "$echo_out"
grep -q '200 echoes of 256 bytes, all correct' <<<"$echo_out"
stop_server
grep -q 'closed after 200 messages' "$out"

# The sharded echo server: four clients at once, each served on a shard of its own (least
# connections), every message back intact.
start_server "$samples/sharded_echo_server" "$addr" 0 4
clients=()
for i in 1 2 3 4; do
    # (The clients give up after 30 s without an echo; this bounds the whole, under the
    # server's 240 s: four clients beside two VMs and a CPU hog made 1,440 round trips a
    # minute each.)
    timeout 200 "$samples/echo_client" "$addr" "$port" 2000 64 >"$out.$i" 2>&1 & clients+=($!)
done
failed=0 # every client's output is shown, and the server's, before a failure ends the test
for i in 1 2 3 4; do
    status=0
    wait "${clients[$((i - 1))]}" || status=$?
    echo "-- client $i (exit status $status):"
    cat "$out.$i"
    grep -q '2000 echoes of 64 bytes, all correct' "$out.$i" || failed=1
    rm -f "$out.$i"
done
if [ $failed != 0 ]; then
    kill -INT $server 2>/dev/null || true
    wait $server || true
    echo "-- server:"
    cat "$out"
    exit 1
fi
stop_server
[ "$(grep -c 'closed after 2000 messages' "$out")" = 4 ]
[ "$(sed -n 's/.* on shard \([0-9]*\) from .*/\1/p' "$out" | sort -u | wc -l)" = 4 ]

# HTTP/1.1 with Beast over an rdmacm::stream: 100 keep-alive requests, each body checked,
# two clients one after the other.
start_server "$samples/http_server" "$addr" 0
for _ in 1 2; do
    http=$(timeout 60 "$samples/http_client" "$addr" "$port" 100)
    echo "$http"
    grep -qx 'client: 100 requests over RDMA, all bodies correct' <<<"$http"
done
stop_server
[ "$(grep -c 'closed after 100 requests' "$out")" = 2 ]

# A line protocol with asio::async_read_until over a stream, server and client in one process.
lines=$(timeout 60 "$samples/line_echo" "$addr" 200)
echo "$lines"
grep -qx 'line_echo: 200 lines answered over RDMA, all correct' <<<"$lines"

# Connections moved between shards while they carry traffic: none lost.
rebalance=$(timeout 90 "$samples/rebalance_demo" "$addr" 8 4)
echo "$rebalance"
grep -q 'connections per shard after:  0: 2  1: 2  2: 2  3: 2' <<<"$rebalance"
grep -q 'lost: 0$' <<<"$rebalance"
grep -q 'rebalance demo: OK' <<<"$rebalance"

# Interoperability: rdma-core's own clients against our server (siw's race: tests/support/r10.sh).
. "$(dirname "$0")/support/r10.sh"
for attempt in 1 2 3; do
    start_server "$samples/cmatose_server" "$addr" 0 10 100
    status=0
    ucmatose_out=$(timeout 30 ucmatose -s "$addr" -p "$port" -C 10 -S 100 -c 2 2>&1) || status=$?
    echo "$ucmatose_out"
    stop_server
    [ $status = 0 ] && break
    r10_retry $attempt "$ucmatose_out" || { echo "ucmatose failed (exit status $status)"; exit 1; }
done
[ "$(grep -c 'sent 10, received 10' "$out")" = 2 ]
start_server "$samples/cmatose_server" "$addr" 0 0
timeout 30 cmtime -s "$addr" -p "$port" -c 10
stop_server
[ "$(grep -c 'sent 0, received 0' "$out")" = 10 ]
