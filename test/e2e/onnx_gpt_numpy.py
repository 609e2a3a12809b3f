"""models/onnx_gpt.py's torch-free GPT against an independent fp64 NumPy forward of the
same weights (written here from the architecture, not from the graph), through ppc eval:
the logits must agree to 1e-5 relative to their scale.

    /usr/bin/python3 test/e2e/onnx_gpt_numpy.py --ppc build/bin/ppc --dir DIR
"""
import argparse
import math
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def numpy_gpt(W, ids, layers, heads):
    B, T = ids.shape
    D = W["wte.weight"].shape[1]
    hd = D // heads
    erf = np.vectorize(math.erf)

    def ln(x, p):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * W[p + ".weight"] + W[p + ".bias"]

    x = W["wte.weight"][ids] + W["wpe.weight"][np.arange(T)][None]
    causal = np.triu(np.full((T, T), -np.inf), 1)
    for i in range(layers):
        p = f"blocks.{i}."
        qkv = ln(x, p + "ln1") @ W[p + "attn.qkv.weight"] + W[p + "attn.qkv.bias"]
        q, k, v = (y.reshape(B, T, heads, hd).transpose(0, 2, 1, 3) for y in np.split(qkv, 3, -1))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + causal
        prob = np.exp(s - s.max(-1, keepdims=True))
        prob /= prob.sum(-1, keepdims=True)
        o = (prob @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
        x = x + o @ W[p + "attn.proj.weight"] + W[p + "attn.proj.bias"]
        h = ln(x, p + "ln2") @ W[p + "mlp.0.weight"] + W[p + "mlp.0.bias"]
        h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
        x = x + h @ W[p + "mlp.2.weight"] + W[p + "mlp.2.bias"]
    return ln(x, "ln_f") @ W["wte.weight"].T


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ppc", required=True)
    p.add_argument("--dir", required=True)
    args = p.parse_args()
    worst = 0.0
    for layers, hidden, heads, batch in ((2, 64, 4, 2), (3, 96, 3, 0)):
        d = os.path.join(args.dir, f"gpt-{layers}-{hidden}-{heads}-{batch}")
        os.makedirs(d, exist_ok=True)
        model = os.path.join(d, "gpt.onnx")
        subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "models", "onnx_gpt.py"),
                        "--layers", str(layers), "--hidden", str(hidden), "--heads", str(heads),
                        "--vocab", "256", "--seq", "16", "--batch", str(batch), "--fill-random",
                        "--seed", str(layers), "-o", model], check=True, capture_output=True)
        ids = np.random.default_rng(layers).integers(0, 256, (batch or 3, 16)).astype(np.int64)
        np.save(os.path.join(d, "ids.npy"), ids)
        cmd = [args.ppc, "eval", model, "--input", "input_ids=" + os.path.join(d, "ids.npy"),
               "--output-dir", d]
        if not batch:
            cmd += ["--dim", f"batch={ids.shape[0]}"]
        subprocess.run(cmd, check=True)
        got = np.load(os.path.join(d, "logits.npy"))
        W = {t.name: numpy_helper.to_array(t).astype(np.float64)
             for t in onnx.load(model).graph.initializer}
        want = numpy_gpt(W, ids, layers, heads)
        error = np.abs(got - want).max() / np.abs(want).max()
        print(f"GPT {layers} layers, d {hidden}, {heads} heads, batch "
              f"{batch or 'dynamic'}: max error {error:.2e} of the logits' scale")
        worst = max(worst, error)
    print("PASS" if worst < 1e-5 else "FAIL")
    sys.exit(0 if worst < 1e-5 else 1)


if __name__ == "__main__":
    main()
