#!/usr/bin/env python3
"""Samples text from a character-level (u8) GPT exported to ONNX, one token at
a time through `ppc eval` (the reference executor): the context (at most the
model's sequence length, the last characters) fills row 0 of the model's
static [batch, seq] input, and the next character is drawn from the logits
at its last position with temperature T.

    /usr/bin/python3 models/sample.py --ppc build/bin/ppc --model trained.onnx \
        --prompt "The GNU General" --chars 200 [--temperature 0.8 --seed 0]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ppc", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--prompt", default="The ")
    p.add_argument("--chars", type=int, default=200)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    graph = onnx.load(args.model, load_external_data=False).graph
    dims = [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim]
    batch, seq = dims
    rng = np.random.default_rng(args.seed)
    text = list(args.prompt.encode())
    sys.stdout.write(args.prompt)
    with tempfile.TemporaryDirectory() as tmp:
        ids_path = os.path.join(tmp, "ids.npy")
        for _ in range(args.chars):
            context = text[-seq:]
            ids = np.zeros((batch, seq), dtype=np.int64)
            ids[0, :len(context)] = context
            np.save(ids_path, ids)
            subprocess.run([args.ppc, "eval", args.model, "--input",
                            f"{graph.input[0].name}={ids_path}", "--output-dir", tmp],
                           check=True, capture_output=True)
            logits = np.load(os.path.join(tmp, f"{graph.output[0].name}.npy"))
            row = logits[0, len(context) - 1].astype(np.float64) / args.temperature
            probs = np.exp(row - row.max())
            probs /= probs.sum()
            token = int(rng.choice(len(probs), p=probs))
            text.append(token)
            sys.stdout.write(bytes([token]).decode("latin-1"))
            sys.stdout.flush()
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
