#!/usr/bin/env bash
# Installs every Debian package ppc needs, then configures and builds it into
# build/ (binaries in build/bin/). Idempotent: re-running only rebuilds what
# changed. Works as root on a fresh Debian 12 machine with no GPU.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${PPC_BUILD_DIR:-$root/build}"

packages=(
  build-essential cmake ninja-build ccache git
  valgrind                     # e2e-memcheck
  clang-19 libclang-rt-19-dev  # the libFuzzer targets (tools/fuzz.sh)
  clang-format-19              # tools/format.sh, ctest format
  libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools
  libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata
  libopenmpi-dev openmpi-bin libopenblas-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-torch python3-onnx python3-numpy python3-venv
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py "${launcher[@]}"
fi
cmake --build "$build" -j "$(nproc)"
