#!/usr/bin/python3
"""Write a GPT-shaped decoder (GPT-2/GPT-3, Megatron-LM's GPT) as ONNX with every weight
in external data, torch-free: the shapes of the published large GPT runs (GPT-3 175B,
Megatron-Turing NLG 530B) without 700 GB of weights.

The architecture is Megatron-LM's GPT (and GPT-2's): learned position embeddings added
to the token embedding; per layer a pre-LayerNorm (with bias), one fused QKV projection
with bias split into heads, causal softmax attention (scores materialised, as Megatron's
2021 runs did), an output projection with bias, a second LayerNorm and a 4h GELU MLP
with biases (GELU as 0.5 x (1 + erf(x / sqrt 2))), residual adds; a final LayerNorm and
the LM head tied to the token embedding (logits = h wte^T). One input ``input_ids``
int64 [batch, seq], one output ``logits`` f32 [batch, seq, vocab] (ppc appends the loss).
Initializers are named as in models/ppc_models.py's gpt (``wte.weight``,
``blocks.{i}.attn.qkv.weight`` [d, 3d] stored [in, out], ...). The weights are a sparse
file (models/onnx_llama.py's layout and its ``ppc.training`` record); ``--fill-random``
writes normal(0, 0.02) weights, ones and zeros for the norms, for small checks.

    /usr/bin/python3 models/onnx_gpt.py --layers 96 --hidden 12288 --heads 96 --seq 2048 \\
        --vocab 51200 --batch 0 -o /tmp/gpt3/gpt.onnx     # GPT-3 175B
"""
import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_llama import FILL_LIMIT, GraphWriter, layout, save  # noqa: E402


def parameter_shapes(a):
    """(name, shape) in the order of ppc_models' GPT's named_parameters()."""
    d, f = a.hidden, 4 * a.hidden
    out = [("wte.weight", (a.vocab, d)), ("wpe.weight", (a.seq, d))]
    for i in range(a.layers):
        p = f"blocks.{i}."
        out += [(p + "ln1.weight", (d,)), (p + "ln1.bias", (d,)),
                (p + "attn.qkv.weight", (d, 3 * d)), (p + "attn.qkv.bias", (3 * d,)),
                (p + "attn.proj.weight", (d, d)), (p + "attn.proj.bias", (d,)),
                (p + "ln2.weight", (d,)), (p + "ln2.bias", (d,)),
                (p + "mlp.0.weight", (d, f)), (p + "mlp.0.bias", (f,)),
                (p + "mlp.2.weight", (f, d)), (p + "mlp.2.bias", (d,))]
    out += [("ln_f.weight", (d,)), ("ln_f.bias", (d,))]
    return out


def write_data(path, entries, total, fill_random, seed):
    with open(path, "wb") as out:
        if fill_random:
            rng = np.random.default_rng(seed)
            for name, shape, offset, length in entries:
                if "ln" in name.split(".")[-2]:
                    value = 1.0 if name.endswith("weight") else 0.0
                    values = np.full(shape, value, dtype=np.float32)
                elif name.endswith("bias"):
                    values = np.zeros(shape, dtype=np.float32)
                else:
                    values = (0.02 * rng.standard_normal(shape)).astype(np.float32)
                out.seek(offset)
                out.write(values.astype("<f4").tobytes())
    os.truncate(path, total)


def build_graph(a):
    g = GraphWriter()
    B, T, D, H = a.batch, a.seq, a.hidden, a.heads
    hd = D // H

    def norm(scope, x, p):
        return g.node(scope, "LayerNormalization", [x, p + ".weight", p + ".bias"], axis=-1,
                      epsilon=1e-5)

    def linear(scope, x, p):
        return g.node(scope, "Add", [g.node(scope, "MatMul", [x, p + ".weight"]), p + ".bias"])

    positions = g.i64("", np.arange(T, dtype=np.int64)[None, :])
    x = g.node("", "Add", [g.node("/wte", "Gather", ["wte.weight", "input_ids"]),
                           g.node("/wpe", "Gather", ["wpe.weight", positions])])
    # The causal mask: 0 on and below the diagonal, float32's lowest above.
    causal = np.triu(np.full((T, T), np.finfo(np.float32).min, dtype=np.float32), 1)
    mask = g.f32("", causal[None, None])
    for i in range(a.layers):
        L, P = f"/blocks.{i}", f"blocks.{i}."
        A = L + "/attn"
        qkv = linear(A + "/qkv", norm(L + "/ln1", x, P + "ln1"), P + "attn.qkv")
        q, k, v = g.node(A, "Split", [qkv, g.i64(A, [D, D, D])], outputs=3, axis=-1)
        shape = g.i64(A, [B, T, H, hd])
        q, k, v = (g.node(A, "Transpose", [g.node(A, "Reshape", [y, shape])], perm=[0, 2, 1, 3])
                   for y in (q, k, v))
        kt = g.node(A, "Transpose", [k], perm=[0, 1, 3, 2])
        scores = g.node(A, "Div", [g.node(A, "MatMul", [q, kt]), g.f32(A, math.sqrt(hd))])
        probs = g.node(A, "Softmax", [g.node(A, "Add", [scores, mask])], axis=-1)
        o = g.node(A, "Transpose", [g.node(A, "MatMul", [probs, v])], perm=[0, 2, 1, 3])
        o = g.node(A, "Reshape", [o, g.i64(A, [B, T, D])])
        x = g.node(L, "Add", [x, linear(A + "/proj", o, P + "attn.proj")])
        M = L + "/mlp"
        h = linear(M + "/mlp.0", norm(L + "/ln2", x, P + "ln2"), P + "mlp.0")
        erf = g.node(M, "Erf", [g.node(M, "Div", [h, g.f32(M, math.sqrt(2.0))])])
        h = g.node(M, "Mul", [g.node(M, "Mul", [h, g.node(M, "Add", [erf, g.f32(M, 1.0)])]),
                              g.f32(M, 0.5)])
        x = g.node(L, "Add", [x, linear(M + "/mlp.2", h, P + "mlp.2")])
    h = norm("/ln_f", x, "ln_f")
    head = g.node("/head", "Transpose", ["wte.weight"], perm=[1, 0])
    g.node("/head", "MatMul", [h, head], outputs=["logits"])
    return g.nodes


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--vocab", type=int, default=51200)
    p.add_argument("--seq", type=int, default=2048, help="sequence length (static)")
    p.add_argument("--batch", type=int, default=1,
                   help="batch size (static); 0: a dynamic batch axis 'batch'")
    p.add_argument("--fill-random", action="store_true",
                   help="write random weights instead of a sparse file (<= 100 MB)")
    p.add_argument("--seed", type=int, default=0, help="seed of --fill-random")
    p.add_argument("-o", "--out", required=True, help="ONNX file; weights go to OUT.data")
    a = p.parse_args(argv)
    if min(a.layers, a.hidden, a.heads, a.vocab, a.seq) < 1 or a.batch < 0:
        p.error("sizes must be positive")
    if a.hidden % a.heads:
        p.error("--hidden must be a multiple of --heads")
    entries, total = layout(parameter_shapes(a))
    if a.fill_random and total > FILL_LIMIT:
        p.error(f"--fill-random refuses {total} bytes of weights (limit {FILL_LIMIT})")
    save(a.out, build_graph(a), entries, total, a.batch, a.seq, a.vocab, "onnx_gpt.py",
         lambda path: write_data(path, entries, total, a.fill_random, a.seed), a.fill_random)

if __name__ == "__main__":
    main()
