#!/usr/bin/env python3
"""`ppc compile` under Valgrind's memcheck: no invalid read or write, no use of
uninitialised memory, on compiles that run every pass family.

    /usr/bin/python3 test/e2e/memcheck.py --ppc build/bin/ppc

A read through a dangling reference usually reads what was there a moment ago
and passes every other test; it fails only when the allocator has reused the
memory, on some other machine. The pipeline pass had one (a DenseMap value
copied into the same map: the insertion can move the table first): CI crashed
on BERT on 2x2x2 while every run here passed. Memcheck sees the read every
time, whatever the allocator does. The three compiles:

1. BERT (3 blocks) on 2x2x2, two micro-batches: the pipeline split (the
   compile that used to read the freed table), tensor and data parallelism.
2. GPT on 2x2 in bf16 for CUDA, ZeRO 3, offload of optimizer and parameters,
   full recomputation, to CUDA source: ZeRO, offload, recomputation, the
   CUDA code generator.
3. LLaMA (dynamic batch) on 1x2x2, interleaved with two virtual stages,
   selective recomputation, to C++: the interleaved schedule, rotary and
   grouped-query attention, the C++ code generator.

Each compile is also run without Valgrind, and the two outputs must be the same
bytes: Valgrind's allocator places every object elsewhere, so anything that
depends on the order of pointers (a DenseMap keyed by operation, iterated)
shows up as a difference. The stage costs of the pipeline split were summed in
such an order.

Leaks are not checked (one compile is one process). Takes about 80 seconds on
two cores.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "models"))
import ppc_models  # noqa: E402

SMALL = dict(vocab=64, d_model=16, n_heads=2, seq=8, batch=4)
TRAIN = ["--data-dtype", "u8", "--optimizer", "adamw"]
CASES = [
    ("bert", dict(SMALL, n_layers=3), False,
     ["--mesh", "2x2x2", "--target", "cpu", "--emit", "mlir", "--batch", "8",
      "--micro-batches", "2"]),
    ("gpt", dict(SMALL, n_layers=2), False,
     ["--mesh", "2x2", "--zero", "3", "--target", "cuda", "--emit", "cuda", "--batch", "4",
      "--precision", "bf16", "--offload", "optimizer+params", "--recompute", "full"]),
    ("llama", dict(SMALL, n_layers=2), True,
     ["--mesh", "1x2x2", "--schedule", "interleaved", "--virtual-stages", "2", "--target",
      "cpu", "--emit", "cpp", "--seq", "8", "--batch", "4",
      "--micro-batches", "2", "--recompute", "selective"]),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ppc", required=True)
    args = parser.parse_args()
    args.ppc = os.path.abspath(args.ppc)
    valgrind = shutil.which("valgrind")
    if not valgrind:
        sys.exit("memcheck: valgrind is not installed (tools/bootstrap.sh installs it)")
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind, cfg, dynamic, flags in CASES:
            model = os.path.join(tmp, kind + ".onnx")
            ppc_models.export(kind, cfg, model, constant_folding=False, dynamic=dynamic)
            # The same relative output name in two directories (the source names
            # the weights file next to it).
            out, native = (os.path.join(tmp, where) for where in ("valgrind", "native"))
            os.makedirs(out, exist_ok=True)
            os.makedirs(native, exist_ok=True)
            compile_args = [args.ppc, "compile", model, *flags, *TRAIN, "-o", kind + ".out"]
            run = subprocess.run([valgrind, "--quiet", "--error-exitcode=99", "--leak-check=no",
                                  *compile_args], capture_output=True, text=True, cwd=out)
            errors = [line for line in run.stderr.splitlines() if line.startswith("==")]
            status = "clean" if run.returncode == 0 else f"exit {run.returncode}"
            same = False
            if run.returncode == 0:
                subprocess.run(compile_args, check=True, capture_output=True, cwd=native)
                with open(os.path.join(out, kind + ".out"), "rb") as a, \
                        open(os.path.join(native, kind + ".out"), "rb") as b:
                    same = a.read() == b.read()
                status += ", the same output as without valgrind" if same else (
                    ", but its output differs from the compile without valgrind")
            print(f"{kind:6} {' '.join(flags[:2])}: {status}, {len(errors)} memcheck lines")
            if run.returncode != 0 or not same:
                print(run.stderr[-6000:])
                failed.append(kind)
    if failed:
        sys.exit("memcheck failed: " + ", ".join(failed))


if __name__ == "__main__":
    main()
