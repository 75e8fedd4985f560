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

# Servers. Here, or across two hosts (tools/rdma-vm/run-pair: bench/pair_bench.sh) on the
# peer, where serve_jobs runs each server side a asks for, through files in the pair's
# directory: job.N (the command, one argument a line), ready.N (it listens), out.N (its
# output), status.N (it ended). The command's address is the peer's own: the same line serves
# on either host.
#
# server_start OUT COMMAND...: starts COMMAND's server, its output to be in OUT, and returns
# once it listens (ours say "listening"; rdma-core's tools after 1 s).
# server_wait: until that server ends (at most 60 s), its output in OUT; returns its status.
# (The jobs are numbered across every script of side a's run, one after the other.)
server_job=0
[ -z "${RDMAVM_PAIR_SIDE:-}" ] || server_job=$(find "$RDMAVM_PAIR_DIR" -maxdepth 1 -name 'job.*' ! -name '*.tmp' | wc -l)
listening() { # OUT COMMAND...: until COMMAND's server, writing to OUT, listens
    local out=$1 word
    shift
    for word in "$@"; do
        [[ $word == */bench/*_bench ]] || continue
        for _ in $(seq 200); do grep -q listening "$out" 2>/dev/null && return; sleep 0.05; done
        return
    done
    sleep 1 # (rdma-core's tools say nothing once they listen)
}
server_start() {
    server_out=$1
    shift
    : >"$server_out"
    if [ -z "${RDMAVM_PAIR_SIDE:-}" ]; then
        "$@" >"$server_out" 2>&1 &
        server_pid=$!
        listening "$server_out" "$@"
        return
    fi
    local job=$RDMAVM_PAIR_DIR/job.$server_job
    printf '%s\n' "$@" >"$job.tmp"
    mv "$job.tmp" "$job"
    for _ in $(seq 1200); do [ -e "$RDMAVM_PAIR_DIR/ready.$server_job" ] && return; sleep 0.05; done
    echo "compare_lib: the peer did not start: $*" >&2
    return 1
}
server_wait() {
    if [ -z "${RDMAVM_PAIR_SIDE:-}" ]; then
        if ! timeout 60 tail --pid="$server_pid" -f /dev/null; then
            kill "$server_pid" 2>/dev/null
            wait "$server_pid"
            return 124
        fi
        wait "$server_pid"
        return
    fi
    local n=$server_job status
    server_job=$((server_job + 1))
    for _ in $(seq 1200); do [ -e "$RDMAVM_PAIR_DIR/status.$n" ] && break; sleep 0.05; done
    cp "$RDMAVM_PAIR_DIR/out.$n" "$server_out" 2>/dev/null || : >"$server_out"
    status=$(cat "$RDMAVM_PAIR_DIR/status.$n" 2>/dev/null) || return 124
    return "$status"
}
# serve_jobs: on side b, the servers side a asks for, one after the other, until a writes
# jobs-done.
serve_jobs() {
    local n=0 pid status
    local -a command
    while :; do
        until [ -e "$RDMAVM_PAIR_DIR/job.$n" ] || [ -e "$RDMAVM_PAIR_DIR/jobs-done" ]; do sleep 0.05; done
        [ -e "$RDMAVM_PAIR_DIR/job.$n" ] || return 0
        mapfile -t command <"$RDMAVM_PAIR_DIR/job.$n"
        "${command[@]}" >"$RDMAVM_PAIR_DIR/out.$n" 2>&1 &
        pid=$!
        listening "$RDMAVM_PAIR_DIR/out.$n" "${command[@]}"
        : >"$RDMAVM_PAIR_DIR/ready.$n"
        status=0
        timeout 60 tail --pid=$pid -f /dev/null || kill $pid 2>/dev/null
        wait $pid || status=$?
        echo $status >"$RDMAVM_PAIR_DIR/status.$n.tmp"
        mv "$RDMAVM_PAIR_DIR/status.$n.tmp" "$RDMAVM_PAIR_DIR/status.$n"
        n=$((n + 1))
    done
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
    local out=$1 tool=$2 dev=$3 addr=$4 port=$5 client server_status try
    shift 5
    for try in 1 2 3; do
        client=0 server_status=0
        server_start "$out.server" timeout 60 stdbuf -oL "$tool" -R -d "$dev" -F -p "$port" "$@" || return 1
        timeout 60 stdbuf -oL "$tool" -R -d "$dev" -F -p "$port" "$@" "$addr" >"$out" 2>&1 || client=$?
        server_wait || server_status=$?
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
