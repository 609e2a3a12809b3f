#!/usr/bin/env bash
# Formats the project's C++ with clang-format 19 and .clang-format (LLVM
# style at 100 columns). `tools/format.sh` rewrites every tracked C++ file
# (or the files given) in place; `tools/format.sh --check` changes nothing
# and exits 1 naming each file that is not formatted (ctest `format` runs
# it, so CI fails on unformatted code). Generated code, test inputs and the
# fuzz corpora are not formatted.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi
formatter="${CLANG_FORMAT:-clang-format-19}"
if ! command -v "$formatter" >/dev/null; then
  echo "format: $formatter not found (tools/bootstrap.sh installs it)" >&2
  exit 1
fi
if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cuh' | grep -v '^fuzz/corpus/')
fi
if [ $check -eq 0 ]; then
  "$formatter" -i --style=file "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  if ! "$formatter" --style=file "$f" | cmp -s - "$f"; then
    bad+=("$f")
  fi
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'not formatted: %s\n' "${bad[@]}" >&2
  echo "format: run tools/format.sh (or tools/format.sh FILE...) and commit the result" >&2
  exit 1
fi
echo "format: all ${#files[@]} files are formatted"
