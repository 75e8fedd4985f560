#!/bin/bash
# Every C++ file is formatted as .clang-format says: SOURCE_DIR. Prints what differs.
set -euo pipefail
cd "$1"
git ls-files '*.cpp' '*.hpp' | xargs clang-format --dry-run -Werror
