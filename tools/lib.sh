# Shared by tools/test and tools/demo (sourced, not run): install what the build needs,
# build, and run a command where a real kernel RDMA CM is: on this host when it has RDMA
# devices of its own, else in the test bed's VM.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$repo/tools/rdma-vm/common.sh"

build_packages=(g++ cmake make pkg-config libboost1.81-dev libboost-test1.81-dev
    libssl-dev librdmacm-dev libibverbs-dev rdma-core ibverbs-providers rdmacm-utils perftest iproute2 valgrind
    clang-format clang-tidy doxygen git)

# Host RDMA usable? Then RDMACM_TEST_DEVICES and the addresses are exported.
host_rdma() { local e; e=$("$repo/tools/rdma-env" 2>/dev/null) && eval "$e"; }

# prepare [TARGET...]: the packages, the devices (the VM's if none here), and the build —
# of the given targets only, else of everything.
prepare() {
    [ "$(id -u)" = 0 ] || die "run as root: it installs Debian packages (and sets up the VM)"
    apt_install "${build_packages[@]}"
    # test_devices: the devices the RDMA tests get an entry for (space-separated).
    if host_rdma; then
        log "host RDMA devices: $RDMACM_TEST_DEVICES"
        test_devices=$RDMACM_TEST_DEVICES
    else
        log "no RDMA on this host: using the Soft-RoCE/soft-iWARP VM"
        "$repo/tools/rdma-vm/setup" >/dev/null
        test_devices="rxe0 siw0"
    fi
    cmake_devices="-DRDMACM_TEST_DEVICES=${test_devices// /;}"
    build=${RDMACM_BUILD_DIR:-$repo/build}
    # Line tables only (-g1): stack traces keep their lines, and a build takes a quarter
    # less time than with full debug information (measured: a test 34 s instead of 45 s).
    cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
        "$cmake_devices" >/dev/null
    local targets=()
    [ $# = 0 ] || targets=(--target "$@")
    cmake --build "$build" -j"$(nproc)" "${targets[@]}" -- --no-print-directory
}

# run_on_rdma [--timeout SECS] CMD...: in the VM with the repo as the shared directory.
run_on_rdma() {
    local t=(--timeout 1500)
    [ "${1:-}" = --timeout ] && { t=(--timeout "$2"); shift 2; }
    if host_rdma; then
        (cd "$repo" && timeout -k 5 "${t[1]}" "$@")
    else
        (cd "$repo" && "$repo/tools/rdma-vm/run-in-vm" "${t[@]}" "$repo" "$@")
    fi
}
