#!/usr/bin/env python3
"""Benchmark: steps per second of `ppc simulate` (reference executor, one
rank) on a GPT export, with the per-step time taken from its JSON log
(start-up and compilation excluded), next to PyTorch eager on the same model,
optimizer and data.

    /usr/bin/python3 bench/simulate_gpt.py --ppc build/bin/ppc [--layers 4 --d-model 256
        --batch 8 --seq 128 --steps 5]
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


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ppc", required=True)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(2)
    cfg = dict(vocab=256, d_model=args.d_model, n_layers=args.layers, n_heads=args.heads,
               seq=args.seq, batch=args.batch)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gpt.onnx")
        model, _ = ppc_models.export("gpt", cfg, path, constant_folding=False)
        log = os.path.join(tmp, "log.jsonl")
        start = time.perf_counter()
        subprocess.run([args.ppc, "simulate", path, "--data", CORPUS, "--data-dtype", "u8",
                        "--steps", str(args.steps), "--optimizer", "adamw", "--log", log],
                       check=True, capture_output=True)
        total = time.perf_counter() - start
        times = [json.loads(line)["step_time"] for line in open(log)]
    torch_times, _ = torch_steps(model, args.steps, args.batch, args.seq)
    params = sum(t.numel() for t in model.parameters())
    ppc_step = statistics.median(times)
    torch_step = statistics.median(torch_times)
    print(f"GPT {args.layers} layers, d={args.d_model}, {params / 1e6:.2f}M parameters, "
          f"batch {args.batch} x {args.seq}, AdamW, median of {args.steps} steps")
    print(f"ppc simulate: {ppc_step:.2f} s/step ({1 / ppc_step:.3f} steps/s; "
          f"whole command {total:.1f} s)")
    print(f"torch eager (2 threads): {torch_step:.3f} s/step ({1 / torch_step:.2f} steps/s)")


if __name__ == "__main__":
    main()
