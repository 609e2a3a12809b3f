#!/usr/bin/env bash
# Bootstraps ppc, then runs its main job on the shipped example model:
# imports examples/gpt-tiny.onnx and prints a summary of the IR.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${PPC_BUILD_DIR:-$root/build}"
"$root/tools/bootstrap.sh"
model="$root/examples/gpt-tiny.onnx"
echo "== ppc import $model --summary" >&2
"$build/bin/ppc" import "$model" --summary
