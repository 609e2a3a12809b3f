#!/usr/bin/env python3
"""Benchmark: the compiled CUDA executable's training throughput on one GPU
against PyTorch eager's on the same GPT, optimizer (AdamW), data and
precision, measured in one run (the issue's GPT-2 124M shape by default:
12 layers, d=768, 12 heads, seq 1024, vocabulary 50257, bf16 GEMMs).

    /usr/bin/python3 bench/cuda_exe_gpt.py --ppc build/bin/ppc [--batch 8 --steps 20
        --precision bf16 --cuda-arch sm_90] [--build-only]

Start-up and compilation are excluded: the executable's step times come
from its JSON log, PyTorch's from CUDA-synchronized timers; both report the
median after three warm-up steps. MFU counts the same FLOPs for both sides
(6 x parameters + 12 x layers x d x seq per token, as llm.c and PaLM do)
against the GPU's dense peak for the precision (bf16: 989 TFLOP/s on H100 and
H200 SXM). PyTorch runs with torch.autocast(bfloat16) for --precision bf16,
the closest eager equivalent of ppc's GEMMs in bf16. --build-only stops after
nvcc (for machines without a GPU).
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

PEAK = {"bf16": 989e12, "fp32": 67e12}  # H100/H200 SXM dense


def torch_cuda_steps(model, tokens, steps, batch, seq, precision):
    model = model.cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    n = len(tokens)
    times, losses = [], []
    for s in range(steps):
        offsets = [((s * batch + b) * seq) % (n - seq - 1) for b in range(batch)]
        x = torch.tensor(np.stack([tokens[o:o + seq] for o in offsets])).cuda()
        y = torch.tensor(np.stack([tokens[o + 1:o + seq + 1] for o in offsets])).cuda()
        torch.cuda.synchronize()
        begin = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - begin)
        losses.append(loss.item())
    return times, losses


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ppc", required=True)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--d-model", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--cuda-arch", default="sm_90")
    p.add_argument("--build-only", action="store_true")
    args = p.parse_args()
    cfg = dict(vocab=args.vocab, d_model=args.d_model, n_layers=args.layers,
               n_heads=args.heads, seq=args.seq, batch=args.batch)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gpt.onnx")
        model, _ = ppc_models.export("gpt", cfg, path, constant_folding=False)
        data = os.path.join(tmp, "tokens.u16")
        rng = np.random.default_rng(0)
        tokens = rng.integers(0, args.vocab, size=4_000_000, dtype=np.uint16)
        tokens.tofile(data)
        exe = os.path.join(tmp, "train")
        start = time.perf_counter()
        subprocess.run([args.ppc, "compile", path, "--mesh", "1", "--target", "cuda",
                        "--cuda-arch", args.cuda_arch, "--precision", args.precision,
                        "--data-dtype", "u16", "--optimizer", "adamw", "-o", exe],
                       check=True, capture_output=True)
        build_seconds = time.perf_counter() - start
        print(f"compiled and built in {build_seconds:.1f} s")
        if args.build_only:
            return
        log = os.path.join(tmp, "log.jsonl")
        subprocess.run(["mpirun", "--allow-run-as-root", "-np", "1", exe, "--data", data,
                        "--steps", str(args.steps), "--log", log], check=True)
        lines = [json.loads(line) for line in open(log)]
    torch_times, torch_losses = torch_cuda_steps(model, tokens.astype(np.int64), args.steps,
                                                 args.batch, args.seq, args.precision)
    params = sum(t.numel() for t in model.parameters())
    tokens_per_step = args.batch * args.seq
    flops_per_token = 6 * params + 12 * args.layers * args.d_model * args.seq
    ppc_step = statistics.median([l["step_time"] for l in lines][3:])
    torch_step = statistics.median(torch_times[3:])
    print(f"GPT {args.layers} layers, d={args.d_model}, {params / 1e6:.1f}M parameters, batch "
          f"{args.batch} x {args.seq}, AdamW, {args.precision}, {torch.cuda.get_device_name()}")
    for name, step in (("ppc executable", ppc_step), ("torch eager", torch_step)):
        rate = tokens_per_step / step
        print(f"{name:15} {step * 1e3:8.1f} ms/step  {rate:9.0f} tok/s  MFU "
              f"{100 * rate * flops_per_token / PEAK[args.precision]:5.1f}%")
    print(f"ratio ppc / torch tokens/s: {torch_step / ppc_step:.3f}")
    print(f"first losses: ppc {lines[0]['loss']:.6f}, torch {torch_losses[0]:.6f}; executable's "
          f"own MFU (GEMMs only): {lines[-1].get('mfu', 0) * 100:.1f}%")


if __name__ == "__main__":
    main()
