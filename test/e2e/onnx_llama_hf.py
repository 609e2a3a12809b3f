#!/usr/bin/env python3
"""models/onnx_llama.py's graph against Hugging Face's LlamaForCausalLM.

onnx_llama.py writes the graph a LLaMA export has without torch (the real-size models
of test/tools/llama7b.test and the `ppc plan` tests are written by it). Here tiny ones,
with random weights (--fill-random), are evaluated by `ppc eval` and compared with
transformers' LlamaForCausalLM holding the same weights: grouped-query attention
(--kv-heads, transformers' repeat_kv), multi-query, a dynamic batch axis (--batch 0,
bound by --dim batch=N) and both weight layouts (--linear). Limit: 1e-5 relative to
the logits' largest magnitude.

    build/hf-venv/bin/python test/e2e/onnx_llama_hf.py --ppc build/bin/ppc
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from transformers import LlamaConfig, LlamaForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
WRITER = os.path.join(HERE, "..", "..", "models", "onnx_llama.py")
LIMIT = 1e-5
CASES = [  # (name, heads, kv heads, batch (0: dynamic), --linear)
    ("mha-static", 4, 4, 2, "matmul"),
    ("gqa-dynamic", 4, 2, 0, "matmul"),
    ("mqa-dynamic-transpose", 4, 1, 0, "transpose"),
]


def torch_logits(path, heads, kv_heads, linear, ids):
    model = onnx.load(path, load_external_data=True)
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=172,
                         num_hidden_layers=2, num_attention_heads=heads,
                         num_key_value_heads=kv_heads, max_position_embeddings=ids.shape[1],
                         rms_norm_eps=1e-6, tie_word_embeddings=False)
    hf = LlamaForCausalLM(config).eval()
    state = {}
    for name, value in hf.state_dict().items():
        if name not in weights:
            state[name] = value  # buffers (rotary inverse frequencies)
            continue
        w = weights[name]
        # --linear matmul stores linear weights as [in, out].
        if w.ndim == 2 and "embed" not in name and linear == "matmul":
            w = w.T.copy()
        assert tuple(w.shape) == tuple(value.shape), (name, w.shape, value.shape)
        state[name] = torch.from_numpy(np.array(w))
    hf.load_state_dict(state)
    with torch.no_grad():
        return hf(torch.from_numpy(ids)).logits.numpy()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ppc", required=True)
    a = p.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, heads, kv_heads, batch, linear in CASES:
            d = os.path.join(tmp, name)
            os.makedirs(d)
            path = os.path.join(d, "llama.onnx")
            subprocess.run([sys.executable, WRITER, "--layers", "2", "--hidden", "64",
                            "--heads", str(heads), "--kv-heads", str(kv_heads),
                            "--intermediate", "172", "--vocab", "256", "--seq", "16",
                            "--batch", str(batch), "--linear", linear, "--fill-random",
                            "-o", path], check=True, capture_output=True)
            rows = batch or 3
            ids = np.random.RandomState(0).randint(0, 256, (rows, 16)).astype(np.int64)
            np.save(os.path.join(d, "ids.npy"), ids)
            cmd = [a.ppc, "eval", path, "--input", "input_ids=" + os.path.join(d, "ids.npy"),
                   "--output-dir", d]
            if batch == 0:
                cmd += ["--dim", f"batch={rows}"]
            subprocess.run(cmd, check=True, capture_output=True)
            got = np.load(os.path.join(d, "logits.npy"))
            want = torch_logits(path, heads, kv_heads, linear, ids)
            error = float(np.abs(got - want).max() / np.abs(want).max())
            ok = got.shape == want.shape and error <= LIMIT
            failures += not ok
            print(f"{name:24s} heads {heads} kv {kv_heads} batch {batch or 'dynamic'} "
                  f"{linear:9s} relative error {error:.2e} {'ok' if ok else 'FAIL'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
