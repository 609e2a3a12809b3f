#!/usr/bin/env python3
"""Benchmark: wall time of `ppc eval` (import + reference executor) on a GPT
export, next to PyTorch's eager forward on the same model and input.

    /usr/bin/python3 bench/eval_gpt.py --ppc build/bin/ppc [--layers 4 --d-model 256
        --batch 8 --seq 128 --repeat 3]

Reports the median over --repeat runs of each; ppc's time includes process
start, import and folding (the whole command a user runs).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import ppc_models  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ppc", required=True)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(2)
    cfg = dict(vocab=args.vocab, d_model=args.d_model, n_layers=args.layers,
               n_heads=args.heads, seq=args.seq, batch=args.batch)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gpt.onnx")
        model, inputs = ppc_models.export("gpt", cfg, path, constant_folding=False)
        params = sum(t.numel() for t in model.parameters())
        ids = os.path.join(tmp, "ids.npy")
        np.save(ids, inputs[0].numpy())
        ppc_times = []
        for precision in ("f32", "f64"):
            times = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                subprocess.run([args.ppc, "eval", path, "--input", f"input_ids={ids}",
                                "--output-dir", tmp, "--dtype", precision],
                               check=True, capture_output=True)
                times.append(time.perf_counter() - start)
            ppc_times.append(statistics.median(times))
        torch_times = []
        with torch.no_grad():
            for _ in range(args.repeat):
                start = time.perf_counter()
                model(*inputs)
                torch_times.append(time.perf_counter() - start)
    print(f"GPT {args.layers} layers, d={args.d_model}, {params / 1e6:.2f}M parameters, "
          f"batch {args.batch} x {args.seq} tokens")
    print(f"ppc eval f32 (whole command): {ppc_times[0]:.2f} s")
    print(f"ppc eval f64 (whole command): {ppc_times[1]:.2f} s")
    print(f"torch eager forward (2 threads): {statistics.median(torch_times):.3f} s")


if __name__ == "__main__":
    main()
