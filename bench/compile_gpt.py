#!/usr/bin/env python3
"""Benchmark: `ppc compile --emit mlir` on a large GPT export with external
weights (default: GPT-2 XL's shape — 48 layers, d=1600, 25 heads, vocab
50257, seq 1024; 1.56B parameters, about 6 GB of weights, which ppc never
loads to compile).

    /usr/bin/python3 bench/compile_gpt.py --ppc build/bin/ppc [--workdir DIR]
        [--mesh 2x4] [--layers 48 --d-model 1600 --heads 25]

Exporting the model with torch takes minutes and ~17 GB of memory; an
existing DIR/gpt.onnx is reused.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ppc", required=True)
    p.add_argument("--workdir", default="/tmp/ppc-compile-bench")
    p.add_argument("--mesh", default="2x4")
    p.add_argument("--layers", type=int, default=48)
    p.add_argument("--d-model", type=int, default=1600)
    p.add_argument("--heads", type=int, default=25)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=2)
    args = p.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    model = os.path.join(args.workdir, "gpt.onnx")
    if not os.path.exists(model):
        import ppc_models
        cfg = dict(vocab=args.vocab, d_model=args.d_model, n_layers=args.layers,
                   n_heads=args.heads, seq=args.seq, batch=args.batch)
        start = time.perf_counter()
        ppc_models.export("gpt", cfg, model, constant_folding=False)
        print(f"export (torch): {time.perf_counter() - start:.0f} s")
    report = os.path.join(args.workdir, "report.json")
    start = time.perf_counter()
    run = subprocess.run([args.ppc, "compile", model, "--mesh", args.mesh, "--emit", "mlir",
                          "-o", os.path.join(args.workdir, "step.mlir"), "--report", report],
                         capture_output=True, text=True)
    wall = time.perf_counter() - start
    if run.returncode != 0:
        sys.exit(run.stderr)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    r = json.load(open(report))
    print(f"GPT {args.layers} layers, d={args.d_model}: {len(r['parameters'])} parameter "
          f"tensors, {r['data_parallel']['parameter_bytes'] / 2**30:.2f} GiB of weights")
    print(run.stderr.strip())
    print(f"ppc compile --mesh {args.mesh} --emit mlir: {wall:.2f} s wall, peak {peak:.0f} MiB")


if __name__ == "__main__":
    main()
