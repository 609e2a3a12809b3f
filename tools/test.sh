#!/usr/bin/env bash
# Bootstraps ppc, then runs every test (lit, GoogleTest, end-to-end) through
# ctest. Exits non-zero on any failure. Extra arguments go to ctest
# (e.g. `tools/test.sh -R lit`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${PPC_BUILD_DIR:-$root/build}"
"$root/tools/bootstrap.sh"
cd "$build"
ctest --output-on-failure "$@"
