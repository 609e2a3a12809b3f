#!/bin/bash
# The GPU protocol (docs/performance.md), run on a lent GPU machine that has
# no ppc build, over bench/gpu/prepare.sh's bundle:
#   0. the kernel tests (test/unit/cuda/EmulatedKernelsTest.cpp, built by
#      nvcc): every kernel of Kernels.cuh against loops in double;
#   1. test/codegen/run-cuda.test's parity (exe_parity.py --prepared);
#   2. GPT-2 124M bf16: the executable against PyTorch eager and
#      torch.compile (bench/cuda_exe_gpt.py --prebuilt);
#   3. each kernel measured beside the compiler's prediction (the
#      executable's --profile, CUDA events; a Chrome trace of the step);
#   4. one step's kernels timed by Nsight Compute (bench/gpu/kernel_table.py).
#
#   bench/gpu/protocol.sh BUNDLE.tar.xz OUT_DIR
#
# Every stage has its own time limit, and a failed stage does not stop the
# next; the outputs land in OUT_DIR.
set -uo pipefail
bundle=$1; out=$2
export PYTHONUNBUFFERED=1
work=/tmp/ppc-gpu && rm -rf $work && mkdir -p $work/inputs
tar -C $work -xJf "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm \
  --format=csv | tee "$out/gpu.txt"
source bench/gpu/env.sh $work/deps.tar.xz
launcher="env $PPC_EXE_ENV"
echo "== 0. the kernels against loops in double (the tensor-core attention among them)"
timeout ${KERNEL_TESTS_TIMEOUT:-120} env $PPC_EXE_ENV $work/kernel-tests --gtest_brief=1 2>&1 \
  | tail -40 | tee "$out/kernel-tests.txt"
echo "== 1. run-cuda.test: parity with ppc simulate"
timeout 150 python3 test/e2e/exe_parity.py --prepared $work/parity --launcher "$launcher" \
  2>&1 | tee "$out/parity.txt"
echo "== 2. GPT-2 124M: executable, torch eager, torch.compile"
timeout ${BENCH_TIMEOUT:-300} python3 bench/cuda_exe_gpt.py --prebuilt $work/gpt2 \
  --launcher "$launcher" --steps ${BENCH_STEPS:-12} --inputs $work/inputs 2>&1 | tee "$out/bench.txt"
echo "== 3. predicted against measured, per kernel (--profile)"
timeout ${PROFILE_TIMEOUT:-120} env $PPC_EXE_ENV $work/gpt2/train \
  --data $work/inputs/tokens.u16 --weights $work/inputs/weights.safetensors --steps 4 \
  --profile "$out/profile.json" --profile-top 30 2>&1 | tee "$out/profile.txt"
echo "== 4. one step's kernels (Nsight Compute)"
timeout ${NCU_TIMEOUT:-150} env $PPC_EXE_ENV ncu --clock-control none \
  --metrics gpu__time_duration.sum -f -o "$out/kernels" $work/gpt2/train \
  --data $work/inputs/tokens.u16 --weights $work/inputs/weights.safetensors --steps 1 \
  > "$out/ncu.log" 2>&1
tail -3 "$out/ncu.log"
ncu --import "$out/kernels.ncu-rep" --csv --print-units base > "$out/ncu.csv" 2>&1
python3 bench/gpu/kernel_table.py "$out/ncu.csv" --top 30 2>&1 | tee "$out/kernels.txt"
