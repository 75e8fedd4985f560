#!/bin/bash
# clang-tidy (.clang-tidy) over the compiled core and the public headers it includes,
# with the build's compile commands: BUILD_DIR SOURCE_DIR. Any finding fails.
set -euo pipefail
build=$1 src=$2
cd "$src"
ls src/*/*.cpp | xargs -P "$(nproc)" -n 1 clang-tidy --quiet -p "$build"
