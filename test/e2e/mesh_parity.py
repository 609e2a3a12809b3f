#!/usr/bin/env python3
"""Partitioned training against one rank: `ppc simulate` on several meshes
must give the losses of `--mesh 1` to a relative 1e-5 per step (DESIGN.md §5),
and the data-parallel traffic in `--report` must match 2 Psi (d-1)/d.

    /usr/bin/python3 test/e2e/mesh_parity.py --ppc build/bin/ppc

The planner does not choose tensor-parallel layouts yet (the tp axis
replicates unless a layout is pinned), so the meshes with tp > 1 check that
replicated tensor-parallel ranks agree, and the LLaMA cases below pin
Megatron's layout with --shard: column-parallel q, k, v, w1, w3 and
row-parallel o, w2 must give the losses of one rank and exactly four
tensor-parallel all-reduces of (batch / dp) * seq * hidden elements per layer.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "models"))
import ppc_models  # noqa: E402

CORPUS = "/usr/share/common-licenses/GPL-3"
CFG = dict(vocab=256, d_model=32, n_layers=2, n_heads=4, seq=16, batch=4)
STEPS = 20
# (mesh, extra flags): the global batch is the model's batch (4) times the
# micro-batches, shared by the data-parallel ranks.
MESHES = [("2", []), ("4", []), ("1x2", []), ("2x2", []),
          ("2", ["--micro-batches", "2"])]


def simulate(ppc, model, tmp, name, mesh, extra, report=None):
    log = os.path.join(tmp, f"{name}.jsonl")
    args = [ppc, "simulate", model, "--mesh", mesh, "--data", CORPUS, "--data-dtype", "u8",
            "--steps", str(STEPS), "--optimizer", "adamw", "--lr", "1e-3",
            "--log", log] + extra
    if report:
        args += ["--report", report]
    run = subprocess.run(args, capture_output=True, text=True)
    if run.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed:\n{run.stderr}")
    return [json.loads(line)["loss"] for line in open(log)]


def megatron_llama_shards():
    shards = []
    for i in range(CFG["n_layers"]):
        for name, dim in (("attn.wq", 0), ("attn.wk", 0), ("attn.wv", 0), ("attn.wo", 1),
                          ("w1", 0), ("w3", 0), ("w2", 1)):
            shards += ["--shard", f"blocks.{i}.{name}.weight:{dim}"]
    return shards


def tensor_parallel(ppc, tmp):
    model = os.path.join(tmp, "llama-tp.onnx")
    ppc_models.export("llama", dict(CFG), model, constant_folding=False)
    base = simulate(ppc, model, tmp, "llama-tp-1", "1", [])
    ok = True
    for mesh, dp in (("1x2", 1), ("1x4", 1), ("2x2", 2)):
        report = os.path.join(tmp, f"llama-tp-{mesh}.json")
        losses = simulate(ppc, model, tmp, f"llama-tp-{mesh}", mesh, megatron_llama_shards(),
                          report)
        worst = max(abs(a - b) / abs(a) for a, b in zip(base, losses))
        bsh = CFG["batch"] // dp * CFG["seq"] * CFG["d_model"]
        tp_reduces = [c for c in json.load(open(report))["per_rank_per_step"]["collectives"]
                      if c["axes"] == ["tp"] and c["op"] == "all_reduce"
                      and c["elements"] == bsh]
        per_layer = len(tp_reduces) / CFG["n_layers"]
        good = worst <= 1e-5 and per_layer == 4
        ok &= good
        print(f"llama  --mesh {mesh:4s} Megatron layout pinned: worst loss rel err {worst:.2e} "
              f"vs --mesh 1; tp all-reduces of b*s*h={bsh} per layer: {per_layer:g} "
              f"-> {'ok' if good else 'FAIL'}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ppc", required=True)
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("gpt", "llama", "bert"):
            model = os.path.join(tmp, f"{kind}.onnx")
            ppc_models.export(kind, dict(CFG), model, constant_folding=False)
            base = {}
            for mesh, extra in MESHES:
                key = tuple(extra)
                if key not in base:
                    base[key] = simulate(args.ppc, model, tmp, f"{kind}-1{len(extra)}", "1",
                                         extra)
                report = os.path.join(tmp, f"{kind}-{mesh}.json")
                losses = simulate(args.ppc, model, tmp, f"{kind}-{mesh}{len(extra)}", mesh,
                                  extra, report)
                worst = max(abs(a - b) / abs(a) for a, b in zip(base[key], losses))
                dp = json.load(open(report))["data_parallel"]
                good = worst <= 1e-5 and len(losses) == STEPS
                if dp["formula_bytes"] > 0:
                    good &= abs(dp["ratio"] - 1) < 1e-3
                ok &= good
                ratio = f"{dp['ratio']:.6f}" if dp["formula_bytes"] > 0 else "-"
                print(f"{kind:6s} --mesh {mesh:4s} {' '.join(extra):18s} worst loss rel err "
                      f"{worst:.2e} vs --mesh 1; dp traffic / 2Psi(d-1)/d = {ratio} "
                      f"-> {'ok' if good else 'FAIL'}")
        ok &= tensor_parallel(args.ppc, tmp)
    print("mesh parity:", "all passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
