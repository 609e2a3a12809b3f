#!/usr/bin/env python3
"""Forward parity of `ppc eval` with PyTorch on the GPT-, LLaMA- and BERT-style
models: the same ONNX export, weights and input ids must give the same logits,
to a relative 1e-5 in float32 and 1e-12 in float64 (a float64 export run with
`ppc eval --dtype f64`). The relative error is max|ppc - torch| / max|torch|.

    /usr/bin/python3 test/e2e/forward_parity.py --ppc build/bin/ppc
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "models"))
import ppc_models  # noqa: E402

CFG = dict(vocab=256, d_model=64, n_layers=2, n_heads=4, seq=16, batch=2)
TOLERANCE = {"f32": 1e-5, "f64": 1e-12}


def ppc_eval(ppc, model_path, inputs, out_dir, dtype):
    args = [ppc, "eval", model_path, "--output-dir", out_dir, "--dtype", dtype]
    for name, path in inputs.items():
        args += ["--input", f"{name}={path}"]
    run = subprocess.run(args, capture_output=True, text=True)
    if run.returncode != 0:
        raise AssertionError(f"ppc eval failed:\n{run.stderr}")
    return np.load(os.path.join(out_dir, "logits.npy"))


def check(ppc, kind, precision, tmp):
    dtype = torch.float32 if precision == "f32" else torch.float64
    path = os.path.join(tmp, f"{kind}-{precision}.onnx")
    model, inputs = ppc_models.export(kind, dict(CFG), path, opset=17,
                                      constant_folding=False, dtype=dtype)
    if precision == "f64":
        # ONNX stores LayerNormalization's epsilon as a float32 attribute; the
        # float64 reference uses that same value.
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.eps = float(np.float32(module.eps))
    with torch.no_grad():
        expected = model(*inputs).numpy()
    files = {}
    for name, tensor in zip(ppc_models.input_names(kind), inputs):
        files[name] = os.path.join(tmp, f"{kind}-{name}.npy")
        np.save(files[name], tensor.numpy())
    out_dir = os.path.join(tmp, f"{kind}-{precision}-out")
    actual = ppc_eval(ppc, path, files, out_dir, precision)
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        print(f"{kind:6s} {precision}: got {actual.dtype}{actual.shape}, "
              f"expected {expected.dtype}{expected.shape} -> FAIL")
        return False
    error = np.abs(actual - expected).max() / np.abs(expected).max()
    ok = error <= TOLERANCE[precision]
    print(f"{kind:6s} {precision}: relative error {error:.3e} "
          f"(tolerance {TOLERANCE[precision]:.0e}) -> {'ok' if ok else 'FAIL'}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ppc", required=True, help="path to the ppc binary")
    args = parser.parse_args()
    torch.set_num_threads(2)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("gpt", "llama", "bert"):
            for precision in ("f32", "f64"):
                ok &= check(args.ppc, kind, precision, tmp)
    print("forward parity:", "all passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
