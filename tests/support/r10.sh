# shellcheck shell=bash
# Sourced by the tests that run rdma-core's ucmatose against our cmatose_server.
# ucmatose's protocol has the server send first; on siw a first message that arrives behind
# the server's MPA reply, before the client read that reply, fails the client's connect
# (Linux 6.1 siw_cm.c, siw_proc_mpareply: "peer sent extra data"; docs/semantics.md R10): a
# kernel race no server can avoid. Exactly that failure is retried, at most twice, each retry
# said; anything else fails at once.
r10_race='cmatose: event: RDMA_CM_EVENT_CONNECT_ERROR, error: -22'
# r10_retry ATTEMPT OUTPUT [ATTEMPTS]: true (saying so) when attempt ATTEMPT of a ucmatose run
# that printed OUTPUT and failed may be run again: it met exactly that race, and fewer than
# ATTEMPTS (default 3) were made.
r10_retry() {
    [ "$1" -lt "${3:-3}" ] && grep -qx "$r10_race" <<<"$2" || return 1
    echo "RETRY $1 of $((${3:-3} - 1)): ucmatose met siw's first-message race (semantics R10): $r10_race"
}
