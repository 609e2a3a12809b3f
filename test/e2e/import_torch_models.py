#!/usr/bin/env python3
"""Exports the GPT-, LLaMA- and BERT-style models with torch.onnx.export and
checks that `ppc import` turns each into static-shape ppc IR whose op counts
follow from the architecture, with no shape computation left.

    /usr/bin/python3 test/e2e/import_torch_models.py --ppc build/bin/ppc
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "models"))
import ppc_models  # noqa: E402

CFG = dict(vocab=256, d_model=64, n_layers=3, n_heads=4, seq=16, batch=2)
L = CFG["n_layers"]

# Op counts implied by each architecture (per block, plus embedding and head).
# "absent" ops must not appear at all: they are folded or decomposed.
EXPECTED = {
    # gpt: qkv, q@k, p@v, proj, fc1, fc2 per block + tied head; 2 LN per block + final.
    ("gpt", 17): {"ppc.matmul": 6 * L + 1, "ppc.layer_norm": 2 * L + 1,
                  "ppc.softmax": L, "ppc.erf": L, "ppc.gather": 2, "ppc.where": L},
    # opset 14 has no LayerNormalization: each LN is two means (mean, variance).
    ("gpt", 14): {"ppc.matmul": 6 * L + 1, "ppc.reduce_mean": 2 * (2 * L + 1),
                  "ppc.softmax": L, "ppc.erf": L, "ppc.gather": 2, "ppc.where": L},
    # llama: q, k, v, o, q@k, p@v, w1, w3, w2 per block + head; RMSNorm = one mean.
    ("llama", 17): {"ppc.matmul": 9 * L + 1, "ppc.reduce_mean": 2 * L + 1,
                    "ppc.softmax": L, "ppc.sigmoid": L, "ppc.gather": 1,
                    "ppc.where": L},
    # bert: embedding LN + 2 post-LNs per block, bidirectional (no mask).
    ("bert", 17): {"ppc.matmul": 6 * L + 1, "ppc.layer_norm": 2 * L + 1,
                   "ppc.softmax": L, "ppc.erf": L, "ppc.gather": 2},
    ("gpt-loss", 17): {"ppc.matmul": 6 * L + 1, "ppc.layer_norm": 2 * L + 1,
                       "ppc.log_softmax": 1, "ppc.nll_loss": 1},
}
# Rotary tables (sin/cos) and the causal mask (trilu) are constants after import.
ABSENT = {"ppc.sin", "ppc.cos", "ppc.trilu", "ppc.cast", "ppc.expand"}
BERT_ABSENT = {"ppc.where"}


def summary(ppc, path):
    out = subprocess.run([ppc, "import", path, "--summary"], capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise AssertionError(f"ppc import {path} failed:\n{out.stderr}")
    text = out.stdout
    ops = {m.group(1): int(m.group(2))
           for m in re.finditer(r"^  (ppc\.\w+)\s+(\d+)$", text, re.M)}
    return text, ops


def check(ppc, kind, opset, folding, tmp):
    path = os.path.join(tmp, f"{kind}-{opset}-{'fold' if folding else 'nofold'}.onnx")
    ppc_models.export(kind, dict(CFG), path, opset=opset, constant_folding=folding)
    text, ops = summary(ppc, path)
    errors = []
    if "(all shapes static)" not in text:
        errors.append("not all shapes are static")
    B, T, V = CFG["batch"], CFG["seq"], CFG["vocab"]
    out = "loss: tensor<f32>" if kind == "gpt-loss" else f"logits: tensor<{B}x{T}x{V}xf32>"
    if f"output      {out}" not in text:
        errors.append(f"expected output {out}")
    for op, n in EXPECTED[(kind, opset)].items():
        # torch's own folding turns wpe(arange(T)) into an initializer.
        if folding and op == "ppc.gather" and kind in ("gpt", "bert"):
            n -= 1
        if ops.get(op, 0) != n:
            errors.append(f"{op}: expected {n}, got {ops.get(op, 0)}")
    absent = ABSENT | (BERT_ABSENT if kind == "bert" else set())
    for op in sorted(absent & ops.keys()):
        errors.append(f"{op} should have been folded away ({ops[op]} left)")
    params = int(re.search(r"parameters\s+(\d+) tensors", text).group(1))
    model = ppc_models.build_model(kind, dict(CFG))
    torch_params = len(list(model.parameters()))
    if not folding and params != torch_params:
        errors.append(f"{params} parameters, torch has {torch_params}")
    label = f"{kind:8s} opset {opset} {'folded' if folding else 'unfolded'}"
    total = re.search(r"^ops\s+(\d+)", text, re.M).group(1)
    print(f"{label}: {total} ops, {params} parameter tensors, "
          f"matmul {ops.get('ppc.matmul', 0)} -> {'FAIL' if errors else 'ok'}")
    for e in errors:
        print(f"    {e}")
    return not errors


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ppc", required=True, help="path to the ppc binary")
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for kind, opset in EXPECTED:
            for folding in (False, True):
                ok &= check(args.ppc, kind, opset, folding, tmp)
    print("e2e import:", "all passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
