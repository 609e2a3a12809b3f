#!/usr/bin/env python3
"""Benchmark: the compiled CPU executable's time per training step on one rank
against PyTorch eager's on the same GPT, optimizer (AdamW), data and thread
count, measured in one run. Start-up and compilation are excluded: the
executable's per-step times come from its JSON log, PyTorch's from timers
around each step; both report the median after one warm-up step.

    /usr/bin/python3 bench/cpu_exe_gpt.py --ppc build/bin/ppc [--layers 4 --d-model 256
        --heads 4 --batch 8 --seq 128 --steps 10 --threads 2 --attention fused,unfused]

Both use OpenBLAS (Debian's python3-torch and libopenblas-dev), with the same
kernels: the executable picks OpenBLAS's kernels for a CPU that OpenBLAS does
not know (runtime/ppcrt/CpuDevice.cpp) and logs them (`device`), and PyTorch
runs in a child process with OPENBLAS_CORETYPE set to them. An
OPENBLAS_CORETYPE already in the environment is kept by both: where it names
weaker kernels than the CPU runs, both sides' GEMMs slow down (Haswell's on a
Zen 5 ran sgemm at 219-227 GFLOP/s against 417-458 with the kernels OpenBLAS
chose: docs/performance.md, 2026-12-03).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import ppc_models  # noqa: E402
from torch_gpt import torch_steps  # noqa: E402

CORPUS = "/usr/share/common-licenses/GPL-3"


def sgemm_rate(threads, n=2048, repeats=10):
    """This machine's f32 GEMM rate through torch (OpenBLAS), FLOP/s: the best of a few."""
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        begin = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - begin)
    return 2.0 * n ** 3 / best


def torch_child(args, cfg, core):
    """PyTorch's step times, losses, parameter and GEMM counts and this machine's
    sgemm rate, measured in a child process whose OpenBLAS uses `core`'s kernels."""
    env = dict(os.environ)
    if core:
        env["OPENBLAS_CORETYPE"] = core
    child = subprocess.run([sys.executable, os.path.abspath(__file__), "--torch-child",
                            json.dumps(dict(cfg=cfg, kind=args.kind, steps=args.steps,
                                            threads=args.threads))],
                           check=True, capture_output=True, text=True, env=env)
    return json.loads(child.stdout.strip().splitlines()[-1])


def run_torch_child(spec):
    spec = json.loads(spec)
    cfg, threads = spec["cfg"], spec["threads"]
    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as tmp:
        model, _ = ppc_models.export(spec["kind"], cfg, os.path.join(tmp, "model.onnx"),
                                     constant_folding=False)
    # The sgemm rate before and after the steps, the better of the two: this
    # machine's speed varies by a third from minute to minute.
    before = sgemm_rate(threads)
    times, losses = torch_steps(model, spec["steps"], cfg["batch"], cfg["seq"])
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    print(json.dumps(dict(times=times, losses=losses, linear=linear,
                          params=sum(t.numel() for t in model.parameters()),
                          sgemm=max(before, sgemm_rate(threads)))))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--torch-child":
        run_torch_child(sys.argv[2])
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ppc", required=True, help="the ppc binary (build/bin/ppc)")
    p.add_argument("--layers", type=int, default=4, help="transformer blocks [4]")
    p.add_argument("--d-model", type=int, default=256, help="model width [256]")
    p.add_argument("--heads", type=int, default=4, help="attention heads [4]")
    p.add_argument("--batch", type=int, default=8, help="sequences per step [8]")
    p.add_argument("--seq", type=int, default=128, help="tokens per sequence [128]")
    p.add_argument("--steps", type=int, default=10,
                   help="steps each side runs; the median of all but the first is reported [10]")
    p.add_argument("--threads", type=int, default=2,
                   help="threads of the executable and of PyTorch [2]")
    p.add_argument("--kind", default="gpt", choices=["gpt", "llama", "bert", "neox"],
                   help="the architecture (models/ppc_models.py)")
    p.add_argument("--attention", default="fused,unfused",
                   help="ppc --attention values to time, each beside the same torch run")
    args = p.parse_args()
    cfg = dict(vocab=256, d_model=args.d_model, n_layers=args.layers, n_heads=args.heads,
               seq=args.seq, batch=args.batch)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        ppc_models.export(args.kind, cfg, path, constant_folding=False)
        runs = {}
        for attention in args.attention.split(","):
            exe = os.path.join(tmp, "train-" + attention)
            start = time.perf_counter()
            subprocess.run([args.ppc, "compile", path, "--mesh", "1", "--target", "cpu",
                            "--data-dtype", "u8", "--optimizer", "adamw", "--attention",
                            attention, "-o", exe], check=True, capture_output=True)
            compile_seconds = time.perf_counter() - start
            log = os.path.join(tmp, f"log-{attention}.jsonl")
            subprocess.run([exe, "--data", CORPUS, "--steps", str(args.steps), "--log", log,
                            "--threads-per-rank", str(args.threads)],
                           check=True, capture_output=True)
            runs[attention] = ([json.loads(line) for line in open(log)], compile_seconds)
    device = next(iter(runs.values()))[0][0]["device"]
    core = device.split("OpenBLAS ")[-1] if "OpenBLAS " in device else ""
    measured = torch_child(args, cfg, core)
    torch_times, torch_losses = measured["times"], measured["losses"]
    torch_step = statistics.median(torch_times[1:])
    tokens = args.batch * args.seq
    # The GEMM roofline: a step's GEMM FLOPs (6 per weight of the linear layers and the
    # head per token, and 12 * layers * d * T per token for the two attention products,
    # as the unfused program computes them) over this machine's measured sgemm rate.
    flops = tokens * (6 * measured["linear"] + 12 * args.layers * args.d_model * args.seq)
    peak = measured["sgemm"]
    print(f"{args.kind} {args.layers} layers, d={args.d_model}, {measured['params'] / 1e6:.2f}M "
          f"parameters, batch {args.batch} x {args.seq}, AdamW, {args.threads} threads, median "
          f"of {args.steps - 1} steps after one warm-up; ppc's device: {device}")
    print(f"sgemm peak here (torch.mm 2048^3, best of 20, {args.threads} threads, OpenBLAS "
          f"{core or 'as detected'}): {peak / 1e9:.0f} GFLOP/s; {flops / 1e9:.1f} GFLOP of GEMMs "
          f"per step")
    print(f"torch eager:    {torch_step * 1e3:.1f} ms/step ({tokens / torch_step:.0f} tok/s), "
          f"GEMM roofline {100 * flops / torch_step / peak:.0f}%, first loss {torch_losses[0]:.6f}")
    for attention, (lines, compile_seconds) in runs.items():
        ppc_step = statistics.median([l["step_time"] for l in lines][1:])
        print(f"ppc --attention {attention}: {ppc_step * 1e3:.1f} ms/step "
              f"({tokens / ppc_step:.0f} tok/s; built in {compile_seconds:.1f} s), "
              f"ppc / torch {ppc_step / torch_step:.3f}, GEMM roofline "
              f"{100 * flops / ppc_step / peak:.0f}%, first loss {lines[0]['loss']:.6f}")


if __name__ == "__main__":
    main()
