# shellcheck shell=bash
# Sourced by the scripts that compare ours with rdma-core's tools (perftest_compare.sh,
# stream_compare.sh), which set `dev` (the device) before they call fail.

# median: of the numbers on stdin, one per line.
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
number() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; }

# fail WHY [FILE...]: says so (the script's name, the device), shows the files (the run's
# output), and stops.
fail() {
    local f
    echo "$(basename "$0" .sh): $dev: $1" >&2
    shift
    for f in "$@"; do echo "--- $(basename "$f"):" >&2; cat "$f" >&2; done
    exit 1
}

# perftest_run OUT TOOL DEVICE ADDRESS PORT [FLAGS...]:
# one run of rdma-core's perftest TOOL over rdma_cm (-R) on DEVICE — its server, then its
# client to ADDRESS, both with FLAGS — the client's output in OUT, the server's in
# OUT.server. A run in which both sides hang (each killed after 60 s; on siw, ib_send_bw -e
# did in 2 of about 18 runs on 2026-11-30, and twice in a row on 2026-12-02) is run again,
# up to twice, counted in perftest_hung; a third hang, or either side failing, returns 1,
# saying so on stderr with both outputs.
perftest_hung=0
perftest_run() {
    local out=$1 tool=$2 dev=$3 addr=$4 port=$5 server client server_status try
    shift 5
    for try in 1 2 3; do
        client=0 server_status=0
        timeout 60 stdbuf -oL "$tool" -R -d "$dev" -F -p "$port" "$@" >"$out.server" 2>&1 &
        server=$!
        sleep 1
        timeout 60 stdbuf -oL "$tool" -R -d "$dev" -F -p "$port" "$@" "$addr" >"$out" 2>&1 || client=$?
        wait $server || server_status=$?
        [ $try -lt 3 ] && [ $client = 124 ] && [ $server_status = 124 ] || break
        perftest_hung=$((perftest_hung + 1))
        echo "perftest: $dev: $tool $*: both sides hung for 60 s; again (the client said:" \
            "$(tail -n 3 "$out" | tr '\n' ' '))" >&2
    done
    if [ $client != 0 ] || [ $server_status != 0 ]; then
        echo "perftest: $dev: $tool $*: client exited with status $client, server with $server_status" >&2
        echo "--- server:" >&2; cat "$out.server" >&2
        echo "--- client:" >&2; cat "$out" >&2
        return 1
    fi
}
