#!/usr/bin/env python3
"""Partitioned training against one rank: `ppc simulate` on several meshes
must give the losses of `--mesh 1` to a relative 1e-5 per step (DESIGN.md §5),
and the data-parallel traffic in `--report` must match 2 Psi (d-1)/d.

    /usr/bin/python3 test/e2e/mesh_parity.py --ppc build/bin/ppc

On meshes with tp > 1 the planner chooses the tensor-parallel layouts by
cost. These models are tiny, so splitting them only pays when memory is
short: for each such mesh the test lowers --memory-per-rank (fractions of
the replicated plan's peak) until every weight matrix of the blocks (and
GPT's tied embedding, by vocabulary) is split over tp, then requires
Megatron's result: exactly four tensor-parallel all-reduces of
(batch / dp) * seq * hidden elements per layer, GPT's vocabulary-parallel
cross-entropy (two all-reduces of (batch / dp) * seq statistics), and the
losses of one rank. The LLaMA case at the end pins Megatron's layout with
--shard instead (column-parallel q, k, v, w1, w3; row-parallel o, w2).
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
MESHES = [("2", []), ("4", []), ("1x2", []), ("1x4", []), ("2x2", []), ("2x4", []),
          ("2", ["--micro-batches", "2"]), ("2x2", ["--micro-batches", "2"])]


def compile_report(ppc, model, tmp, mesh, extra):
    report = os.path.join(tmp, "plan.json")
    args = [ppc, "compile", model, "--mesh", mesh, "--emit", "mlir",
            "-o", os.path.join(tmp, "plan.mlir"), "--report", report] + extra
    run = subprocess.run(args, capture_output=True, text=True)
    if run.returncode != 0:
        return None
    return json.load(open(report))


def layer_tp_reduces(report, bsh):
    """Tensor-parallel all-reduces of bsh elements, per layer (by the node
    that computed the reduced value)."""
    counts = [0] * CFG["n_layers"]
    for c in report["per_rank_per_step"]["collectives"]:
        if c["axes"] == ["tp"] and c["op"] == "all_reduce" and c["elements"] == bsh:
            for i in range(CFG["n_layers"]):
                if f"/blocks.{i}/" in c["value"]:
                    counts[i] += 1
    return counts


def megatron_budget(ppc, model, tmp, mesh, extra):
    """The largest --memory-per-rank (a fraction of the replicated plan's
    peak, to 0.02) at which the planner splits every weight matrix of the
    blocks (and GPT's tied embedding by vocabulary): tenths first, then
    hundredths above the first tenth that does."""
    peak = compile_report(ppc, model, tmp, mesh, extra)["plan"]["peak_bytes"]

    def splits(hundredths):
        budget = int(peak * hundredths / 100)
        report = compile_report(ppc, model, tmp, mesh,
                                extra + ["--memory-per-rank", str(budget)])
        if report is None:
            return None
        matrices = {k: v for k, v in report["parameters"].items()
                    if k.startswith("blocks.") and k.endswith("weight") and "], [" in v}
        # GPT ties its embedding to the LM head: Megatron splits it by rows
        # (the vocabulary), with a vocabulary-parallel cross-entropy.
        vocab = report["parameters"].get("wte.weight", "") if "gpt" in model else ""
        return all("tp" in v for v in matrices.values()) and (not vocab or "[[tp], []]" in vocab)

    for tenths in range(9, 2, -1):
        found = splits(tenths * 10)
        if found is None:
            break
        if found:
            best = tenths * 10
            for hundredths in range(best + 8, best, -2):
                if splits(hundredths):
                    best = hundredths
                    break
            return int(peak * best / 100), best / 100
    raise AssertionError(f"{model} --mesh {mesh}: no budget splits every block matrix "
                         "(and GPT's embedding by vocabulary)")


def vocab_parallel(report, bs):
    """GPT's vocabulary-parallel embedding and cross-entropy: the embedding's
    partial lookups are summed once (an all-reduce of b*s*h, counted as
    '/Add' where wte and wpe meet) and the loss all-reduces two statistics
    of b*s elements (the maximum and the sum of exponentials)."""
    stats = [c for c in report["per_rank_per_step"]["collectives"]
             if c["axes"] == ["tp"] and c["value"] == "cross_entropy" and c["elements"] == bs]
    return report["parameters"]["wte.weight"], len(stats)


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
    for mesh, dp in (("1x4", 1),):
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


def sequence_parallel(ppc, tmp):
    """--sequence-parallel on 1x4: the activations between the blocks are
    split along the sequence over tp. Each of Megatron's four all-reduces
    per layer becomes a reduce-scatter (forward: after the row-parallel
    matmuls; backward: after the column-parallel ones' input gradients) and
    an all-gather (forward: before the column-parallel matmuls; backward:
    the output gradient before the row-parallel ones), and the backward
    all-gathers the column-parallel matmuls' inputs again for their weight
    gradients, as Megatron does, instead of keeping them whole: 4 + 2
    all-gathers and 4 reduce-scatters of b*s*h per layer, and no
    all-reduce of b*s*h. GPT adds its vocabulary-parallel ends: the
    embedding's reduce-scatter, and the final norm's all-gather, its
    re-gather for the LM head's weight gradient and the LM head's input
    gradient's reduce-scatter."""
    ok = True
    for kind in ("gpt", "llama", "bert"):
        model = os.path.join(tmp, f"{kind}.onnx")
        mesh, flags = "1x4", ["--sequence-parallel"]
        base = simulate(ppc, model, tmp, f"{kind}-sp-1", "1", [])
        budget, fraction = megatron_budget(ppc, model, tmp, mesh, flags)
        report = os.path.join(tmp, f"{kind}-sp.json")
        losses = simulate(ppc, model, tmp, f"{kind}-sp", mesh,
                          flags + ["--memory-per-rank", str(budget)], report)
        worst = max(abs(a - b) / abs(a) for a, b in zip(base, losses))
        bsh = CFG["batch"] * CFG["seq"] * CFG["d_model"]
        tp = [c for c in json.load(open(report))["per_rank_per_step"]["collectives"]
              if c["axes"] == ["tp"] and c["elements"] == bsh]
        count = {op: sum(c["op"] == op for c in tp)
                 for op in ("all_gather", "reduce_scatter", "all_reduce")}
        layers = CFG["n_layers"]
        rs_per_layer = [sum(c["op"] == "reduce_scatter" and f"/blocks.{i}/" in c["value"]
                            for c in tp) for i in range(layers)]
        good = (worst <= 1e-5 and len(losses) == STEPS and count["all_reduce"] == 0
                and all(n == 4 for n in rs_per_layer))
        if kind == "gpt":
            good &= (count["all_gather"] == 6 * layers + 2
                     and count["reduce_scatter"] == 4 * layers + 2)
        ok &= good
        print(f"{kind:6s} --mesh {mesh} --sequence-parallel (memory {fraction:.2f}x): worst loss "
              f"rel err {worst:.2e} vs --mesh 1; of b*s*h={bsh}: {count['all_gather']} "
              f"all-gathers, {count['reduce_scatter']} reduce-scatters ({rs_per_layer} in the "
              f"blocks), {count['all_reduce']} all-reduces -> {'ok' if good else 'FAIL'}")
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
                dp, tp = (int(x) for x in (mesh.split("x") + ["1"])[:2])
                flags, budget_note = list(extra), ""
                if tp > 1:
                    budget, fraction = megatron_budget(args.ppc, model, tmp, mesh, extra)
                    flags += ["--memory-per-rank", str(budget)]
                    budget_note = f"memory {fraction:.2f}x replicated: "
                report = os.path.join(tmp, f"{kind}-{mesh}.json")
                losses = simulate(args.ppc, model, tmp, f"{kind}-{mesh}{len(extra)}", mesh,
                                  flags, report)
                worst = max(abs(a - b) / abs(a) for a, b in zip(base[key], losses))
                r = json.load(open(report))
                dpr = r["data_parallel"]
                good = worst <= 1e-5 and len(losses) == STEPS
                if dpr["formula_bytes"] > 0:
                    good &= abs(dpr["ratio"] - 1) < 1e-3
                tp_note = ""
                if tp > 1:
                    micro = int(extra[1]) if extra else 1
                    # The model's batch is one micro-batch (--batch defaults to it
                    # times --micro-batches).
                    bsh = CFG["batch"] // dp * CFG["seq"] * CFG["d_model"]
                    per_layer = [n / micro for n in layer_tp_reduces(r, bsh)]
                    good &= all(n == 4 for n in per_layer)
                    tp_note = (f"; {budget_note}tp all-reduces of b*s*h={bsh} per layer per "
                               f"micro-batch {per_layer}")
                    if kind == "gpt":
                        wte, stats = vocab_parallel(r, bsh // CFG["d_model"])
                        good &= stats == 2 * micro
                        tp_note += (f"; wte {wte.replace('#ppc.sharding<@mesh, ', '')[:-1]} with {stats / micro:g} "
                                    f"cross-entropy statistic all-reduces per micro-batch")
                ok &= good
                ratio = f"{dpr['ratio']:.6f}" if dpr["formula_bytes"] > 0 else "-"
                print(f"{kind:6s} --mesh {mesh:4s} {' '.join(extra):18s} worst loss rel err "
                      f"{worst:.2e} vs --mesh 1; dp traffic / 2Psi(d-1)/d = {ratio}{tp_note} "
                      f"-> {'ok' if good else 'FAIL'}")
        ok &= tensor_parallel(args.ppc, tmp)
        ok &= sequence_parallel(args.ppc, tmp)
    print("mesh parity:", "all passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
