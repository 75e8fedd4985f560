#!/bin/bash
# check.sh find_package|add_subdirectory SOURCE_DIR BUILD_DIR: builds and runs the
# consumer project against an install of BUILD_DIR, or against SOURCE_DIR directly.
set -euo pipefail
mode=$1 src=$2 build=$3
work=$(mktemp -d)
# Unoptimized, no debug information: what is checked is that it builds, links and runs.
flags=(-DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0)
trap 'rm -rf "$work"' EXIT
if [ "$mode" = find_package ]; then
    cmake --install "$build" --prefix "$work/prefix" >/dev/null
    pc_dir=$(dirname "$(find "$work/prefix" -name asio-rdmacm.pc)")
    [ -f "$pc_dir/asio-rdmacm.pc" ] || { echo "no pkg-config file installed"; exit 1; }
    # It names the prefix installed to, not the one configured.
    includedir=$(PKG_CONFIG_PATH=$pc_dir pkg-config --variable=includedir asio-rdmacm)
    [ -f "$includedir/rdmacm/cm_id.hpp" ] ||
        { echo "the pkg-config file's includedir, $includedir, is not the install's"; exit 1; }
    cmake -S "$src/tests/consumer" -B "$work/b" "${flags[@]}" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
else
    cmake -S "$src/tests/consumer" -B "$work/b" "${flags[@]}" -DASIO_RDMACM_SOURCE="$src" >/dev/null
fi
cmake --build "$work/b" -j2 >/dev/null
"$work/b/consumer"
