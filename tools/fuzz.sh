#!/usr/bin/env bash
# Builds ppc's libFuzzer targets (fuzz/, with clang, ASan and UBSan) into a
# build tree of their own and runs them; fuzz/README.md says more.
#
#   tools/fuzz.sh --build              configure and build only
#   tools/fuzz.sh --smoke              replay every seed, then fuzz each target
#                                      for 30 s (what CI runs); fails on a crash
#   tools/fuzz.sh --long TARGET HOURS  one target for HOURS, growing its
#                                      corpus in the build tree
#
# TARGET is onnx-import, npy, safetensors, checkpoint-index or mlir-parse.
# The tree is build-fuzz/ (PPC_FUZZ_BUILD_DIR overrides it, PPC_FUZZ_JOBS
# the build's parallelism and how many targets --smoke fuzzes at once);
# reproducers are written to its artifacts/TARGET/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${PPC_FUZZ_BUILD_DIR:-$root/build-fuzz}"
targets=(onnx-import npy safetensors checkpoint-index mlir-parse)
jobs="${PPC_FUZZ_JOBS:-2}"

usage() {
  sed -n '4,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

build_targets() {
  local cxx=clang++-19 cc=clang-19
  if ! command -v "$cxx" >/dev/null; then
    echo "fuzz.sh: $cxx not found; tools/bootstrap.sh installs clang-19 and libclang-rt-19-dev" >&2
    exit 1
  fi
  local launcher=()
  command -v ccache >/dev/null &&
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  if [ ! -f "$build/build.ninja" ]; then
    cmake -S "$root" -B "$build" -G Ninja -DPPC_FUZZ=ON -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" "${launcher[@]}" >/dev/null
  fi
  cmake --build "$build" -j "$jobs"
}

# fuzzer TARGET ARGS...: runs TARGET's binary. A UBSan report is a crash,
# with its stack; stacks name functions with LLVM 19's symbolizer (package
# llvm-19). LLVM's BumpPtrAllocator poisons its slabs for ASan in the code
# we instrument but not in libMLIR, which shares MLIRContext's allocators
# with it, so MLIR's own allocations would read as use-after-poison: manual
# poisoning is off. onnx-import reads its models "from" an empty directory
# of the build tree.
fuzzer() {
  local target="$1"
  shift
  mkdir -p "$build/empty-model-dir"
  PPC_FUZZ_MODEL_DIR="$build/empty-model-dir" \
    ASAN_SYMBOLIZER_PATH="${ASAN_SYMBOLIZER_PATH:-/usr/lib/llvm-19/bin/llvm-symbolizer}" \
    ASAN_OPTIONS="allow_user_poisoning=0:${ASAN_OPTIONS:-}" \
    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}" \
    "$build/bin/fuzz-$target" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$build/artifacts/$target/" "$@"
}

# replay TARGET: runs every seed once, failing on any crash (the seeds
# include the reproducers of fixed bugs).
replay() {
  mkdir -p "$build/artifacts/$1"
  fuzzer "$1" -runs=0 "$root/fuzz/corpus/$1"
}

# run TARGET SECONDS CORPUS: fuzzes TARGET for SECONDS from the seeds,
# writing what it finds to CORPUS, then reports every reproducer it wrote.
# On one core, in libFuzzer's fork mode (-fork=1: one child at a time),
# which keeps each reproducer as an artifact and goes on fuzzing, so a long
# run collects every crash instead of stopping at the first.
run() {
  local target="$1" seconds="$2" corpus="$3" marker
  mkdir -p "$corpus" "$build/artifacts/$target"
  marker="$(mktemp)"
  fuzzer "$target" -fork=1 -ignore_ooms=1 -ignore_timeouts=1 -ignore_crashes=1 \
    -max_total_time="$seconds" "$corpus" "$root/fuzz/corpus/$target" || true
  local status=0
  triage "$target" "$marker" || status=1
  rm -f "$marker"
  return $status
}

# triage TARGET MARKER: replays each crash, timeout and leak reproducer
# written since MARKER was and prints its report; any fails the run. An
# input that only runs out of memory is kept but no failure: an ONNX model
# may ask the importer's folding for a constant of many GiB (issue 20).
triage() {
  local target="$1" marker="$2" file status=0
  local found=()
  mapfile -t found < <(find "$build/artifacts/$target" -maxdepth 1 -type f -newer "$marker" \
                         \( -name 'crash-*' -o -name 'timeout-*' -o -name 'leak-*' \))
  for file in "${found[@]}"; do
    echo "fuzz.sh: $target: $file; its report:"
    fuzzer "$target" "$file" 2>&1 | grep -E 'ERROR|runtime error|Assertion|what\(\)|^ +#[0-9]+ ' |
      head -n 30 || true
    status=1
  done
  return $status
}

is_target() {
  local t
  for t in "${targets[@]}"; do [ "$t" = "$1" ] && return 0; done
  return 1
}

# smoke_one TARGET: replays TARGET's seeds, then fuzzes it for 30 s from a
# scratch corpus (the seeds stay as committed), logging to
# smoke-TARGET.log; its status is the run's.
smoke_one() {
  local target="$1" scratch status=0
  scratch="$(mktemp -d)"
  { replay "$target" && run "$target" 30 "$scratch"; } >"$build/smoke-$target.log" 2>&1 ||
    status=1
  rm -rf "$scratch"
  return $status
}

# smoke: every target through smoke_one, $jobs at a time (each fuzzes on one
# core), then a summary line per target.
smoke() {
  local failed=() target pids=() i
  for i in "${!targets[@]}"; do
    target="${targets[$i]}"
    echo "fuzz.sh: $target: $(ls "$root/fuzz/corpus/$target" | wc -l) seeds, then 30 s" >&2
    smoke_one "$target" &
    pids[$i]=$!
    # Wait for the oldest running target once $jobs are running.
    if [ "$i" -ge "$((jobs - 1))" ]; then
      wait "${pids[$((i - jobs + 1))]}" || failed+=("${targets[$((i - jobs + 1))]}")
    fi
  done
  for ((i = ${#targets[@]} - jobs + 1; i < ${#targets[@]}; i++)); do
    [ "$i" -ge 0 ] || continue
    wait "${pids[$i]}" || failed+=("${targets[$i]}")
  done
  for target in "${targets[@]}"; do
    echo "fuzz.sh: $target:" >&2
    grep -E '^#[0-9]+: cov' "$build/smoke-$target.log" | tail -n 1 | sed 's/^/  /' >&2 || true
  done
  if [ ${#failed[@]} -gt 0 ]; then
    for target in "${failed[@]}"; do
      echo "fuzz.sh: $target failed; its log ($build/smoke-$target.log) ends:" >&2
      tail -n 40 "$build/smoke-$target.log" >&2
    done
    echo "fuzz.sh: smoke run failed: ${failed[*]} (reproducers in $build/artifacts/)" >&2
    exit 1
  fi
}

case "${1:-}" in
  --build)
    build_targets ;;
  --smoke)
    build_targets
    smoke ;;
  --long)
    [ $# -eq 3 ] && is_target "$2" || usage
    build_targets
    replay "$2"
    run "$2" "$(awk -v h="$3" 'BEGIN { printf "%d", h * 3600 }')" "$build/corpus/$2" ;;
  *)
    usage ;;
esac
