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

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import ppc_models  # noqa: E402

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
    tokens = np.fromfile(CORPUS, dtype=np.uint8).astype(np.int64)
    n, B, T = len(tokens), args.batch, args.seq
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    torch_times = []
    for s in range(args.steps):
        offsets = [((s * B + b) * T) % (n - T - 1) for b in range(B)]
        x = torch.tensor(np.stack([tokens[o:o + T] for o in offsets]))
        y = torch.tensor(np.stack([tokens[o + 1:o + T + 1] for o in offsets]))
        begin = time.perf_counter()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        torch_times.append(time.perf_counter() - begin)
    params = sum(t.numel() for t in model.parameters())
    ppc_step = statistics.median(times)
    torch_step = statistics.median(torch_times)
    print(f"GPT {args.layers} layers, d={args.d_model}, {params / 1e6:.2f}M parameters, "
          f"batch {B} x {T}, AdamW, median of {args.steps} steps")
    print(f"ppc simulate: {ppc_step:.2f} s/step ({1 / ppc_step:.3f} steps/s; "
          f"whole command {total:.1f} s)")
    print(f"torch eager (2 threads): {torch_step:.3f} s/step ({1 / torch_step:.2f} steps/s)")


if __name__ == "__main__":
    main()
