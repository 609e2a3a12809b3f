#!/usr/bin/env python3
"""Benchmark: the compiled CUDA executable's training throughput on one GPU
against PyTorch eager's and torch.compile's on the same GPT, optimizer
(AdamW), weights, data and precision, measured in one run (the GPT-2 124M
shape by default: 12 layers, d=768, 12 heads, seq 1024, vocabulary 50257,
--precision bf16).

    /usr/bin/python3 bench/cuda_exe_gpt.py --ppc build/bin/ppc [--batch 8 --steps 20
        --precision bf16 --cuda-arch sm_90] [--build-only [--keep DIR]]
    python3 bench/cuda_exe_gpt.py --prebuilt DIR [--launcher ""]

A GPU machine without ppc (the lent ones: bench/gpu/README.md) takes the
executable built elsewhere: --build-only --keep DIR compiles it into DIR with
the configuration beside it, and --prebuilt DIR runs it there; the weights
are then written from the PyTorch model itself (--weights), so both sides
start from the same parameters whatever the torch version.

The executable runs twice: as built (each step from the second on one CUDA
graph) and with --cuda-graphs=false (every kernel launched from the host).
Start-up and compilation are excluded: the executable's step times come
from its JSON log, PyTorch's from CUDA-synchronized timers; both report the
median after three warm-up steps (torch.compile's compilation happens in its
first step). MFU counts the same FLOPs for both sides (6 x parameters + 12 x
layers x d x seq per token, as llm.c and PaLM do) against the GPU's dense
peak for the precision (bf16: 989 TFLOP/s on H100 and H200 SXM). PyTorch runs
with torch.autocast(bfloat16) for --precision bf16, as users run it (ppc's
bf16 keeps every activation in bf16, as Megatron-LM does; autocast keeps
softmax, norms and the residual stream in f32). --build-only stops after nvcc (for
machines without a GPU).
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


def torch_cuda_steps(model, tokens, steps, batch, seq, precision, compiled=False):
    model = model.cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    forward = torch.compile(model) if compiled else model
    n = len(tokens)
    times, losses = [], []
    for s in range(steps):
        offsets = [((s * batch + b) * seq) % (n - seq - 1) for b in range(batch)]
        x = torch.tensor(np.stack([tokens[o:o + seq] for o in offsets])).cuda()
        y = torch.tensor(np.stack([tokens[o + 1:o + seq + 1] for o in offsets])).cuda()
        torch.cuda.synchronize()
        begin = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            logits = forward(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - begin)
        losses.append(loss.item())
    return times, losses


def write_weights(model, path):
    """The model's parameters (tied ones once) as an F32 safetensors file with
    the names the exporter gives the initializers (needs neither onnx nor the
    safetensors package)."""
    tensors = {name: p.detach().float().contiguous().numpy()
               for name, p in model.named_parameters()}
    header, offset = {}, 0
    for name, array in sorted(tensors.items()):
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for name in sorted(tensors):
            f.write(tensors[name].tobytes())


def build(args, cfg, out):
    """Export the GPT and compile it into out/train; returns the seconds taken."""
    path = os.path.join(out, "gpt.onnx")
    ppc_models.export("gpt", cfg, path, constant_folding=False)
    start = time.perf_counter()
    # --profile-plan's predicted kernels go beside the executable (predicted.txt), to
    # set against what Nsight Compute measures on the GPU (bench/gpu/kernel_table.py).
    proc = subprocess.run([args.ppc, "compile", path, "--mesh", "1", "--target", "cuda",
                           "--cuda-arch", args.cuda_arch, "--precision", args.precision,
                           "--data-dtype", "u16", "--optimizer", "adamw", "--profile-plan",
                           "--profile-top", "25", "-o", os.path.join(out, "train")],
                          check=True, capture_output=True, text=True)
    with open(os.path.join(out, "predicted.txt"), "w") as f:
        f.write(proc.stderr[proc.stderr.find("predicted step"):])
    os.remove(path)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(dict(cfg, precision=args.precision), f)
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ppc", help="the ppc to compile with (not with --prebuilt)")
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
    p.add_argument("--keep", metavar="DIR", help="with --build-only: build into DIR")
    p.add_argument("--prebuilt", metavar="DIR", help="run DIR's executable (--keep's)")
    p.add_argument("--launcher", default="mpirun --allow-run-as-root -np 1",
                   help="command line before the executable ('' runs it as an MPI singleton)")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--inputs", metavar="DIR",
                   help="keep the weights and token files in DIR (weights.safetensors, "
                        "tokens.u16) for runs of the executable under a profiler")
    args = p.parse_args()
    if args.prebuilt:
        cfg = json.load(open(os.path.join(args.prebuilt, "config.json")))
        args.precision = cfg.pop("precision")
    else:
        if not args.ppc:
            p.error("--ppc is needed unless --prebuilt")
        cfg = dict(vocab=args.vocab, d_model=args.d_model, n_layers=args.layers,
                   n_heads=args.heads, seq=args.seq, batch=args.batch)
    batch, seq, layers, d_model = cfg["batch"], cfg["seq"], cfg["n_layers"], cfg["d_model"]
    with tempfile.TemporaryDirectory() as tmp:
        out = args.prebuilt or args.keep or tmp
        if not args.prebuilt:
            os.makedirs(out, exist_ok=True)
            print(f"compiled and built in {build(args, cfg, out):.1f} s")
            if args.build_only:
                return
        model = ppc_models.build_model("gpt", cfg)
        inputs = args.inputs or tmp
        os.makedirs(inputs, exist_ok=True)
        weights = os.path.join(inputs, "weights.safetensors")
        write_weights(model, weights)
        data = os.path.join(inputs, "tokens.u16")
        rng = np.random.default_rng(0)
        tokens = rng.integers(0, cfg["vocab"], size=4_000_000, dtype=np.uint16)
        tokens.tofile(data)
        # The executable runs each step from the second on as one CUDA graph;
        # --cuda-graphs=false launches every kernel from the host, for the
        # graph's gain measured in the same run (the losses must not differ).
        runs = []
        for name, flags in (("ppc executable", []),
                            ("ppc, no graph", ["--cuda-graphs=false"])):
            log = os.path.join(tmp, "log.jsonl")
            subprocess.run(args.launcher.split() + [os.path.join(out, "train"), "--data", data,
                           "--weights", weights, "--steps", str(args.steps), "--log", log]
                           + flags, check=True)
            lines = [json.loads(line) for line in open(log)]
            runs.append((name, [l["step_time"] for l in lines], [l["loss"] for l in lines]))
            if name == "ppc executable":
                graph_nodes, executable_mfu = lines[-1].get("graph_nodes", 0), lines[-1].get("mfu", 0)
        if runs[0][2] != runs[1][2]:
            print("warning: the losses with and without the CUDA graph differ")
    sides = [("torch eager", False)] + ([] if args.no_compile else [("torch.compile", True)])
    for name, compiled in sides:
        fresh = ppc_models.build_model("gpt", cfg)
        times, losses = torch_cuda_steps(fresh, tokens.astype(np.int64), args.steps, batch, seq,
                                         args.precision, compiled)
        runs.append((name, times, losses))
    params = sum(t.numel() for t in model.parameters())
    tokens_per_step = batch * seq
    flops_per_token = 6 * params + 12 * layers * d_model * seq
    print(f"GPT {layers} layers, d={d_model}, {params / 1e6:.1f}M parameters, batch "
          f"{batch} x {seq}, AdamW, {args.precision}, {torch.cuda.get_device_name()}, "
          f"median of steps 4..{args.steps}")
    steps = {}
    for name, times, losses in runs:
        step = statistics.median(times[3:])
        steps[name] = step
        rate = tokens_per_step / step
        print(f"{name:15} {step * 1e3:8.1f} ms/step  {rate:9.0f} tok/s  MFU "
              f"{100 * rate * flops_per_token / PEAK[args.precision]:5.1f}%  "
              f"losses {losses[0]:.5f} .. {losses[-1]:.5f}")
    for name in steps:
        if name != "ppc executable":
            print(f"ppc / {name} tokens/s: {steps[name] / steps['ppc executable']:.3f}")
    print(f"executable's own MFU (GEMMs only): {executable_mfu * 100:.1f}%; its CUDA graph "
          f"replaces {graph_nodes} launches per step")


if __name__ == "__main__":
    main()
