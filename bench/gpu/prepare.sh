#!/bin/bash
# Builds, on a machine with ppc and the CUDA toolkit, everything
# bench/gpu/protocol.sh runs on a GPU machine that has no ppc: the kernel
# tests built by nvcc, the parity executables with ppc simulate's losses, the
# GPT-2 124M bf16 executable, and the libraries they need there
# (bundle-deps.sh), packed as one archive.
#
#   bench/gpu/prepare.sh BUILD_DIR OUT.tar.xz
set -euo pipefail
build=$1; out=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
py=/usr/bin/python3
ninja -C "$build" ppc-cuda-kernel-tests-gpu
cp "$build/bin/ppc-cuda-kernel-tests-gpu" "$stage/kernel-tests"
$py "$src/test/e2e/exe_parity.py" --ppc "$build/bin/ppc" --target cuda --prepare "$stage/parity"
$py "$src/bench/cuda_exe_gpt.py" --ppc "$build/bin/ppc" --build-only --keep "$stage/gpt2"
# The executable reads --weights there: 500 MB of initial weights stay here.
rm "$stage/gpt2/train.weights.safetensors"
"$src/bench/gpu/bundle-deps.sh" "$stage/deps.tar.xz" "$stage/parity/gpt-1" "$stage/gpt2/train" \
  "$stage/kernel-tests"
tar -C "$stage" -cJf "$out" kernel-tests parity gpt2 deps.tar.xz
echo "$out: $(du -h "$out" | cut -f1)"
