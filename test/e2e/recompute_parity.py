#!/usr/bin/env python3
"""Activation recomputation (--recompute) changes memory, never the numbers.

    /usr/bin/python3 test/e2e/recompute_parity.py --ppc build/bin/ppc
    build/hf-venv/bin/python test/e2e/recompute_parity.py --ppc build/bin/ppc --models hf-gpt2,hf-llama

1. `ppc simulate` with --recompute selective and full gives the loss and
   gradient-norm trace of --recompute none bit for bit (the clones run the
   same ops on the same values in the same order), on meshes 1, 2x2 and
   2x2x2 with two micro-batches, while the executor's measured peak per rank
   goes down: full below selective below none on mesh 1.
2. --recompute auto (the default) under a --memory-per-rank between the
   peaks of selective and none recomputes attention cores and no whole
   block, and its measured peak fits the budget; under the default 80 GB it
   recomputes nothing.
3. The compiled executables give none's trace with full (and with
   selective on 2x2x2), bit for bit: CPU ones on meshes 1, 2x2 and 2x2x2,
   and GPT's on the CUDA emulator on 2x2 when ppc has it; `ppc compile`
   reports the level of each block.

`hf-gpt2` and `hf-llama` are Hugging Face transformers models (the
configurations of hf_families.py), whose blocks are found from the scopes
torch.onnx.export gives their node names (/transformer/h.0/..., /model/layers.0/...).
A GPT whose nodes have no names gets its blocks from the forward's cut points.

4. With --precision bf16 and ZeRO 3 on 4 (the bf16 weight copies gathered again
   for the backward, not recomputed), selective and full give none's trace bit for
   bit, in simulate and in the CUDA emulator's executables.

5. Under a budget the plan fits only with recomputation, the planner prices
   ZeRO stages with and without it and picks the fastest that fits: GPT on
   2x2 gets a plan with recomputation whose simulated peak fits, with the
   losses of one device (relative 1e-5).
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "models"))
import ppc_models  # noqa: E402

CORPUS = "/usr/share/common-licenses/GPL-3"
CFG = dict(vocab=256, d_model=32, n_layers=3, n_heads=4, seq=16, batch=4)
TRAINING = ["--data-dtype", "u8", "--batch", "8", "--micro-batches", "2", "--optimizer",
            "adamw", "--lr", "1e-3"]
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


def export_model(kind, path):
    if not kind.startswith("hf-"):
        ppc_models.export(kind, CFG, path, constant_folding=False)
        return
    sys.path.insert(0, HERE)
    import hf_families
    family = kind[len("hf-"):]
    # GPT-2 through the export helper, LLaMA as torch.onnx.export's defaults
    # leave it (constant folding, eval mode).
    hf_families.export(hf_families.build(family), family, path,
                       "helper" if family == "gpt2" else "plain")


def run(args):
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args[:4])} ... failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def read(log):
    lines = [json.loads(l) for l in open(log)]
    return [(l["loss"], l["grad_norm"]) for l in lines], lines[-1].get("peak_bytes_per_rank")


def simulate(ppc, model, tmp, tag, mesh, extra=()):
    log = os.path.join(tmp, f"{tag}.jsonl")
    run([ppc, "simulate", model, "--mesh", mesh, "--data", CORPUS, "--steps", "4", "--log", log]
        + TRAINING + list(extra))
    return read(log)


def ranks(mesh):
    n = 1
    for a in mesh.split("x"):
        n *= int(a)
    return n


def build(ppc, model, tmp, tag, mesh, target, policy):
    """Builds the executable of `tag`; returns what ppc compile printed."""
    return run([ppc, "compile", model, "--mesh", mesh, "--target", target, "--recompute",
                policy, "-o", os.path.join(tmp, f"{tag}-exe")] + TRAINING).stderr


def executable(tmp, tag, mesh):
    """Trains `tag`'s executable for 4 steps; returns its trace."""
    log = os.path.join(tmp, f"{tag}.jsonl")
    run(MPIRUN + ["-np", str(ranks(mesh)), os.path.join(tmp, f"{tag}-exe"), "--data", CORPUS,
                  "--steps", "4", "--log", log])
    return read(log)[0]


def model_case(ppc, kind, tmp, meshes, targets):
    model = os.path.join(tmp, f"{kind}.onnx")
    export_model(kind, model)
    peaks = {}
    for mesh in meshes:
        none, peak_none = simulate(ppc, model, tmp, f"{kind}-{mesh}-none", mesh,
                                   ["--recompute", "none"])
        row = [f"{kind:9} {mesh:6}"]
        for policy in ("selective", "full"):
            trace, peak = simulate(ppc, model, tmp, f"{kind}-{mesh}-{policy}", mesh,
                                   ["--recompute", policy])
            assert trace == none, f"{kind} {mesh} {policy}: traces differ\n{trace}\n{none}"
            peaks[mesh, policy] = max(peak)
            row.append(f"{policy} identical, peak {max(peak)}")
        peaks[mesh, "none"] = max(peak_none)
        print("  ".join(row) + f"  (none: peak {max(peak_none)}, loss {none[-1][0]:.6f})")
    # Full keeps less than selective, but both can reach the step's floor (a peak
    # outside the blocks, which no recomputation lowers): Hugging Face LLaMA's
    # 1537208 bytes, its peak on 2x2 under every policy, which selective reached
    # once ppc-fold-into-gemms dropped the weight gradients' batched products.
    assert peaks["1", "full"] <= peaks["1", "selective"] < peaks["1", "none"], peaks

    # auto: nothing under the default budget; some blocks, not all, under a
    # budget between selective's peak and none's.
    default, _ = simulate(ppc, model, tmp, f"{kind}-auto-default", "1")
    # Two thirds of the way from selective's peak to none's: the planner
    # prices a plan by the unfused program's peak, a few percent above what
    # simulate measures at the step's floor (Hugging Face LLaMA: selective
    # priced at about 1.58 MB, measured at 1537188 bytes). Once the loss's
    # one-hot was no longer stored (ppc-simplify-one-hots), none's peak fell
    # to 1611336 and the midpoint below that price.
    budget = peaks["1", "selective"] + 2 * (peaks["1", "none"] - peaks["1", "selective"]) // 3
    trace, peak = simulate(ppc, model, tmp, f"{kind}-auto", "1",
                           ["--memory-per-rank", str(budget)])
    exe = os.path.join(tmp, f"{kind}-auto.mlir")
    # The CPU target's program is simulate's; the CUDA target's also
    # recomputes pointwise values in the gradients' kernels, which keeps less
    # (under this budget it fits with none).
    emitted = run([ppc, "compile", model, "--mesh", "1", "--target", "cpu", "--memory-per-rank",
                   str(budget), "--emit", "mlir", "-o", exe] + TRAINING)
    levels = re.findall(r"recompute (none|selective|full)", emitted.stderr)
    print(f"{kind:9} auto under {budget} bytes: measured peak {max(peak)}, levels {levels}")
    assert default == trace and max(peak) <= budget, (max(peak), budget)
    # The least that fits: the attention cores suffice, no block is fully
    # recomputed.
    assert "full" not in levels and any(l != "none" for l in levels), emitted.stderr

    for target, mesh in targets:
        tag = f"{kind}-{target}-{mesh}"
        policies = ["selective", "full"] if mesh.count("x") == 2 else ["full"]
        # The builds (a compiler process each) two at a time.
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as builds:
            reports = [builds.submit(build, ppc, model, tmp, f"{tag}-{policy}", mesh, target,
                                     policy) for policy in ["none"] + policies]
            reports = dict(zip(["none"] + policies, [r.result() for r in reports]))
        base = executable(tmp, f"{tag}-none", mesh)
        row = []
        for policy in policies:
            trace, report = executable(tmp, f"{tag}-{policy}", mesh), reports[policy]
            assert trace == base, f"{kind} {target} {mesh} {policy}:\n{trace}\n{base}"
            assert f"recompute {policy}" in report, report
            row.append(f"{policy} identical")
        print(f"{kind:9} {target:13} {mesh:6} executables: {', '.join(row)} to none")


def bf16_case(ppc, tmp, kinds, emulator):
    """--precision bf16 with ZeRO 3 on 4 data-parallel ranks: the bf16 copies of
    the weights, which ZeRO 3 gathers again for the backward, are not recomputed;
    activations are, bit for bit (in simulate, and for GPT in the CUDA emulator's
    executables). (Data parallelism alone: with a tensor-parallel axis the planner
    may split differently with and without recomputation, and bf16 partial sums
    round differently.)"""
    bf16 = ["--precision", "bf16", "--zero", "3"]
    for kind in kinds:
        model = os.path.join(tmp, f"{kind}.onnx")
        none, _ = simulate(ppc, model, tmp, f"{kind}-bf16-none", "4", ["--recompute", "none"] + bf16)
        row = [f"{kind:9} 4   bf16 ZeRO 3"]
        for policy in ("selective", "full"):
            trace, _ = simulate(ppc, model, tmp, f"{kind}-bf16-{policy}", "4",
                                ["--recompute", policy] + bf16)
            assert trace == none, f"{kind} bf16 {policy}: traces differ\n{trace}\n{none}"
            row.append(f"{policy} identical")
        print("  ".join(row) + f"  (none: loss {none[-1][0]:.6f})")
    if emulator:
        model = os.path.join(tmp, "gpt.onnx")
        traces = {}
        for policy in ("none", "selective"):
            exe = os.path.join(tmp, f"gpt-bf16-{policy}-exe")
            run([ppc, "compile", model, "--mesh", "4", "--target", "cuda-emulator",
                 "--recompute", policy, "-o", exe] + TRAINING + bf16)
            log = os.path.join(tmp, f"gpt-bf16-{policy}-exe.jsonl")
            run(MPIRUN + ["-np", "4", exe, "--data", CORPUS, "--steps", "4", "--log", log])
            traces[policy] = read(log)[0]
        assert traces["selective"] == traces["none"], traces
        print("gpt       cuda-emulator 4 bf16 ZeRO 3 executables: selective identical to none")


def planner_case(ppc, tmp, kind="gpt", mesh="2x2"):
    """The planner chooses recomputation beside ZeRO and tp layouts: the
    largest budget (in steps of 10%, from half of what the plan without
    recomputation needs) whose plan is priced with recomputation; its
    simulated peak fits, and its losses are those of one device."""
    model = os.path.join(tmp, f"{kind}.onnx")
    one, _ = simulate(ppc, model, tmp, f"{kind}-planner-1", "1", ["--recompute", "none"])
    _, peak = simulate(ppc, model, tmp, f"{kind}-planner-none", mesh, ["--recompute", "none"])
    # From half of it (where, for these models, the model states no longer
    # fit with the activations, whatever the ZeRO stage), down by 10%.
    budget = max(peak) // 2 * 10 // 9
    for _ in range(10):
        budget = int(budget * 0.9)
        ir, report = os.path.join(tmp, "planner.mlir"), os.path.join(tmp, "planner.json")
        proc = subprocess.run([ppc, "compile", model, "--mesh", mesh, "--memory-per-rank",
                               str(budget), "--emit", "mlir", "-o", ir, "--report", report]
                              + TRAINING, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"no plan with recomputation before the budget failed:\n{proc.stderr}")
        plan = re.search(r'ppc.plan = \{[^}]*recompute = "(\w+)"', open(ir).read())
        zero = re.search(r"ppc.zero = (\d)", open(ir).read())
        reported = json.load(open(report))
        reported = (reported["programs"][0] if "programs" in reported else reported)["plan"]
        reported = reported.get("recompute")
        assert plan and reported == plan.group(1), (reported, plan)
        if plan.group(1) != "none":
            break
    else:
        sys.exit("the planner never chose recomputation")
    trace, peak = simulate(ppc, model, tmp, f"{kind}-planner", mesh,
                           ["--memory-per-rank", str(budget)])
    error = max(abs(a[0] - b[0]) / abs(b[0]) for a, b in zip(trace, one))
    print(f"{kind} {mesh} under {budget} bytes: planner chose ZeRO {zero.group(1)} with "
          f"{plan.group(1)} recomputation; measured peak {max(peak)}; worst relative loss "
          f"error against one device {error:.1e}")
    assert max(peak) <= budget and error <= 1e-5, (peak, budget, error)


def nameless_case(ppc, tmp):
    """A model whose nodes have no names: blocks are the forward's segments."""
    import onnx
    model = os.path.join(tmp, "gpt.onnx")
    if not os.path.exists(model):
        export_model("gpt", model)
    graph = onnx.load(model)
    for node in graph.graph.node:
        node.name = ""
    nameless = os.path.join(tmp, "gpt-nameless.onnx")
    onnx.save(graph, nameless)
    none, _ = simulate(ppc, nameless, tmp, "nameless-none", "1", ["--recompute", "none"])
    full, _ = simulate(ppc, nameless, tmp, "nameless-full", "1", ["--recompute", "full"])
    report = run([ppc, "compile", nameless, "--recompute", "full", "--emit", "mlir", "-o",
                  os.path.join(tmp, "nameless.mlir")] + TRAINING).stderr
    segments = 1 + max(int(n) for n in re.findall(r"segment (\d+)", report))
    print(f"nameless gpt: {segments} segments, full identical to none: {full == none}")
    # Two per layer: the attention half and the MLP half of each block.
    assert full == none and segments == 2 * CFG["n_layers"], report


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ppc", required=True)
    parser.add_argument("--models", default="gpt,llama,bert")
    args = parser.parse_args()
    hf = args.models.startswith("hf-")
    meshes = ["1", "2x2"] if hf else ["1", "2x2", "2x2x2"]
    targets = [("cpu", "2x2x2")] if hf else [("cpu", m) for m in meshes]
    emulator = subprocess.run([args.ppc, "compile", "--help"], capture_output=True, text=True)
    if "cuda-emulator" in emulator.stdout and not hf:
        targets.append(("cuda-emulator", "2x2"))
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.models.split(","):
            model_case(args.ppc, kind, tmp, meshes,
                       [t for t in targets if t[0] == "cpu" or kind == "gpt"])
        if not hf:
            bf16_case(args.ppc, tmp, args.models.split(","),
                      any(t[0] == "cuda-emulator" for t in targets))
            planner_case(args.ppc, tmp)
            nameless_case(args.ppc, tmp)


if __name__ == "__main__":
    main()
