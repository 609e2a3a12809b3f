#!/usr/bin/env python3
"""Fused attention (ppc.attention, the default) computes what the exported matmuls and
softmax compute, on models ppc's authors wrote and on Hugging Face's.

    tools/hf_venv.sh build/hf-venv python test/e2e/attention_parity.py --ppc build/bin/ppc

1. Matching: for ppc's GPT, LLaMA and BERT and the Hugging Face families below (built
   by test/e2e/hf_families.py, exported by python/ppc_export.py), `ppc compile --emit
   mlir` makes one `ppc.attention` per layer, and no softmax is left but the loss's.
   (Mixtral's router keeps its softmax.) Every family listed must match.
2. Numbers: `ppc simulate` with `--attention fused` against `--attention unfused`:
   worst relative loss and gradient-norm difference over 10 steps within 1e-5 in f32
   (the families that must match). With `--precision bf16` (ppc's three, Hugging
   Face's GPT-2 and LLaMA) the two programs round at different points (the unfused
   one its scores and normalised probabilities, the fused one its probabilities
   before their product with v, as FlashAttention does), so they drift apart like two
   samples of bf16 noise; what must hold is that fused attention trains as close to
   f32 as the unfused program does: over the models and three corpora, the ratio of
   the fused bf16 run's distance from the fused f32 run to the unfused bf16 run's
   from the unfused f32 run, geometric mean within BF16_MEAN_LIMIT and each within
   BF16_EACH_LIMIT (measured 2026-12-03 on these and three more families, 24
   samples: geometric mean 1.05 with the forward's probabilities rounded, 1.05
   without; single samples up to 1.55, and 1.51 without).
3. Executables: the CPU target on a 2x2 mesh (heads split by tensor parallelism) and
   the CUDA target on ppc's emulator (mesh 2, and bf16 on mesh 1) against simulate
   with fused attention, within 1e-5 (bf16: 1e-3 of the bf16 simulate); and Hugging
   Face BERT with a padding mask bound from a file (the op's bias, broadcast over heads
   and queries) on the CPU target against the unfused program.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "models"))
sys.path.insert(0, HERE)
import ppc_models  # noqa: E402
import hf_families  # noqa: E402

CORPUS = "/usr/share/common-licenses/GPL-3"
CFG = dict(vocab=256, d_model=32, n_layers=2, n_heads=4, seq=16, batch=4)
STEPS = 10
F32_LIMIT, EXE_LIMIT, EXE_BF16_LIMIT = 1e-5, 1e-5, 1e-3
BF16_MEAN_LIMIT, BF16_EACH_LIMIT = 1.25, 2.0
# The bf16 comparison's samples: the same model trained on three texts.
CORPORA = [CORPUS, "/usr/share/common-licenses/Apache-2.0", "/usr/share/common-licenses/MPL-2.0"]
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
# Hugging Face families whose attention must fuse and train as unfused does (BLOOM's
# ALiBi as a bias, OPT's clamp, Falcon's multi-query heads broadcast by the matmul).
HF_MUST_MATCH = ["gpt2", "llama", "llama_mqa_t128", "mistral", "bert", "bloom", "gpt_neox",
                 "opt", "roberta", "falcon"]
HF_ALSO = ["gptj", "phi", "albert", "mixtral"]  # matched, not trained here (time)
HF_BF16 = {"gpt2", "llama"}  # also trained in bf16, fused against unfused


def run(args, timeout=900):
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args[:6])} ... failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def ranks(mesh):
    n = 1
    for a in mesh.split("x"):
        n *= int(a)
    return n


def read_log(path):
    return [(d["loss"], d["grad_norm"]) for d in map(json.loads, open(path))]


def worst(a, b):
    assert len(a) == len(b) == STEPS, (a, b)
    return max(abs(x - y) / max(abs(y), 1e-30) for p, q in zip(a, b) for x, y in zip(p, q))


def simulate(ppc, model, tmp, tag, extra=(), corpus=CORPUS):
    log = os.path.join(tmp, f"{tag}.jsonl")
    run([ppc, "simulate", model, "--data", corpus, "--data-dtype", "u8", "--steps", str(STEPS),
         "--log", log, *extra])
    return read_log(log)


def executable(ppc, model, tmp, tag, mesh, target, extra=()):
    exe = os.path.join(tmp, f"{tag}-exe")
    log = exe + ".jsonl"
    run([ppc, "compile", model, "--mesh", mesh, "--target", target, "--data-dtype", "u8",
         "-o", exe, *extra])
    run(MPIRUN + ["-np", str(ranks(mesh)), exe, "--data", CORPUS, "--steps", str(STEPS),
                  "--log", log, "--threads-per-rank", "1"])
    return read_log(log)


def matched(ppc, model, tmp, tag):
    """(ppc.attention ops, softmax ops left) in @train_step's forward."""
    out = os.path.join(tmp, f"{tag}.mlir")
    run([ppc, "compile", model, "--emit", "mlir", "--data-dtype", "u8", "-o", out])
    text = open(out).read()
    return len(re.findall(r"= ppc\.attention ", text)), len(re.findall(r"= ppc\.softmax ", text))


def model_case(ppc, tmp, name, model, layers, must_match, table, bf16=False):
    fused, left = matched(ppc, model, tmp, name)
    row = {"model": name, "layers": layers, "fused": fused, "softmax_left": left}
    if fused != layers:
        table.append(row)
        if must_match:
            sys.exit(f"{name}: {fused} of {layers} attention layers fused ({left} softmax left)")
        return row
    a = simulate(ppc, model, tmp, f"{name}-fused")
    b = simulate(ppc, model, tmp, f"{name}-unfused", ["--attention", "unfused"])
    row["f32"] = worst(a, b)
    if row["f32"] > F32_LIMIT:
        sys.exit(f"{name}: fused against unfused attention, worst relative error "
                 f"{row['f32']:.3g} > {F32_LIMIT}")
    if not bf16:
        table.append(row)
        return row
    # Per corpus: what bf16 does to the fused program, and to the unfused one.
    row["bf16"] = []
    for i, corpus in enumerate(CORPORA):
        programs = {"fused": [], "unfused": ["--attention", "unfused"]}
        f32 = [a, b] if i == 0 else [
            simulate(ppc, model, tmp, f"{name}-{i}-f32-{tag}", extra, corpus)
            for tag, extra in programs.items()]
        low = [simulate(ppc, model, tmp, f"{name}-{i}-bf16-{tag}",
                        ["--precision", "bf16", *extra], corpus)
               for tag, extra in programs.items()]
        row["bf16"].append((worst(low[0], f32[0]), worst(low[1], f32[1])))
    ratios = [f / u for f, u in row["bf16"]]
    if max(ratios) > BF16_EACH_LIMIT:
        sys.exit(f"{name}: bf16 moves the fused program {max(ratios):.3g}x as far from f32 as "
                 f"the unfused one (limit {BF16_EACH_LIMIT}): {row['bf16']}")
    table.append(row)
    return row


def bf16_mean_ratio(table):
    """The geometric mean over every bf16 sample of how far bf16 moves the fused
    program from f32, relative to the unfused program."""
    logs = [math.log(f / u) for r in table for f, u in r.get("bf16", [])]
    return math.exp(sum(logs) / len(logs)) if logs else None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ppc", required=True)
    p.add_argument("--only", help="comma-separated models (gpt, llama, bert, hf-<family>)")
    args = p.parse_args()
    only = set(args.only.split(",")) if args.only else None
    table = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("gpt", "llama", "bert"):
            if only and kind not in only:
                continue
            model = os.path.join(tmp, f"{kind}.onnx")
            ppc_models.export(kind, CFG, model, constant_folding=False)
            model_case(args.ppc, tmp, kind, model, CFG["n_layers"], True, table, bf16=True)
        for family in HF_MUST_MATCH + HF_ALSO:
            name = "hf-" + family
            if only and name not in only:
                continue
            model = os.path.join(tmp, f"{name}.onnx")
            net = hf_families.build(family)
            hf_families.export(net, family, model, "helper")
            layers = net.config.num_hidden_layers
            if family in HF_MUST_MATCH:
                model_case(args.ppc, tmp, name, model, layers, True, table,
                           bf16=family in HF_BF16)
            else:
                fused, left = matched(args.ppc, model, tmp, name)
                table.append({"model": name, "layers": layers, "fused": fused,
                              "softmax_left": left})
                if fused != layers:
                    sys.exit(f"{name}: {fused} of {layers} attention layers fused")

        exe_rows = []
        if not only or "gpt" in only:
            model = os.path.join(tmp, "gpt.onnx")
            reference = simulate(args.ppc, model, tmp, "gpt-fused")
            for mesh, target in (("2x2", "cpu"), ("2", "cuda-emulator")):
                got = executable(args.ppc, model, tmp, f"gpt-{target}-{mesh}", mesh, target)
                error = worst(got, reference)
                exe_rows.append(f"gpt {target} mesh {mesh}: worst relative error against "
                                f"simulate {error:.2e}")
                if error > EXE_LIMIT:
                    sys.exit(exe_rows[-1] + f" > {EXE_LIMIT}")
        if not only or "hf-bert" in only:
            # A padding mask bound from a file: the fused op's bias, broadcast over the
            # heads and the queries (strides the emitter works out), in the CPU
            # executable against the unfused program.
            import numpy as np
            model = os.path.join(tmp, "hf-bert.onnx")
            mask = np.ones((hf_families.BATCH, hf_families.SEQ), dtype=np.int64)
            mask[0, -3:] = 0
            mask[2, -6:] = 0
            np.save(os.path.join(tmp, "mask.npy"), mask)
            bind = ["--bind", "attention_mask=" + os.path.join(tmp, "mask.npy")]
            reference = simulate(args.ppc, model, tmp, "hf-bert-mask-unfused",
                                 bind + ["--attention", "unfused"])
            got = executable(args.ppc, model, tmp, "hf-bert-mask-cpu", "1", "cpu", bind)
            error = worst(got, reference)
            exe_rows.append(f"hf-bert cpu mesh 1, padding mask: worst relative error against "
                            f"unfused simulate {error:.2e}")
            if error > EXE_LIMIT:
                sys.exit(exe_rows[-1] + f" > {EXE_LIMIT}")
        if not only or "llama" in only:
            model = os.path.join(tmp, "llama.onnx")
            reference = simulate(args.ppc, model, tmp, "llama-bf16-fused", ["--precision", "bf16"])
            got = executable(args.ppc, model, tmp, "llama-bf16-cuda", "1", "cuda-emulator",
                             ["--precision", "bf16"])
            error = worst(got, reference)
            exe_rows.append(f"llama cuda-emulator mesh 1 bf16: worst relative error against "
                            f"bf16 simulate {error:.2e}")
            if error > EXE_BF16_LIMIT:
                sys.exit(exe_rows[-1] + f" > {EXE_BF16_LIMIT}")

    print(f"{'model':<20} {'layers':>6} {'fused':>5} {'softmax left':>12} "
          f"{'f32 fused/unfused':>18}  bf16 from f32, fused / unfused, per corpus")
    for r in table:
        f32 = f"{r['f32']:.2e}" if "f32" in r else "-"
        bf16 = "  ".join(f"{f:.2e} / {u:.2e}" for f, u in r.get("bf16", [])) or "-"
        print(f"{r['model']:<20} {r['layers']:>6} {r['fused']:>5} {r['softmax_left']:>12} "
              f"{f32:>18}  {bf16}")
    mean = bf16_mean_ratio(table)
    if mean is not None:
        print(f"bf16: the fused program's distance from f32 over the unfused one's, geometric "
              f"mean {mean:.3f} (limit {BF16_MEAN_LIMIT})")
        if mean > BF16_MEAN_LIMIT:
            sys.exit(f"bf16: fused attention trains {mean:.3g}x as far from f32 as unfused "
                     f"attention (geometric mean; limit {BF16_MEAN_LIMIT})")
    for line in exe_rows:
        print(line)


if __name__ == "__main__":
    main()
