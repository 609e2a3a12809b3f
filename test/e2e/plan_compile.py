#!/usr/bin/env python3
"""`ppc plan`'s plans against what `ppc compile` makes of them.

For small GPT and LLaMA models with a dynamic batch axis, `ppc plan --json` lists the
fastest plan of each mesh shape for 8 devices under a memory budget that forces
trade-offs (pipelines, ZeRO, recomputation, offload). Every plan's `ppc compile`
command is then run (`--emit mlir`), and:

* it must compile, and fit: ppc compile accepts it and warns of no program whose
  exact memory plan exceeds --memory-per-rank;
* the plan's predicted peak per rank is compared with that exact memory plan (the
  largest over pipeline stages): it may not be below it by more than 10% (a plan
  that does not fit where ppc plan says it does), nor above it by more than
  OVER (the optimizer's update is priced unfused, as ppc compile's planner prices
  it: the worst measured is 1.34, LLaMA on 8x1x1 with ZeRO 2; 1.56 before the
  pricer held a value sliced to its hint as the slice, 2.17 before splat
  constants were priced as the partitioner makes them).

GPT is planned under two budgets: 24 MiB, and 18 MiB, where ppc compile used to
refuse a printed plan by its own estimate. (At 12 MiB two pipelined plans are
still predicted under their compiled peak, 1x4x2 with 8 micro-batches by 13%, and
1x2x4 prints under a budget its program exceeds by 7%: a stage is priced as 1/pp
of the step; open, in docs/architecture.md.)

    /usr/bin/python3 test/e2e/plan_compile.py --ppc build/bin/ppc
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "..", "models")
UNDER, OVER = 0.9, 1.5
GPT = [sys.executable, os.path.join(MODELS, "ppc_models.py"), "--kind", "gpt", "--d-model", "128",
       "--layers", "8", "--heads", "4", "--vocab", "512", "--seq", "128", "--dynamic",
       "--no-constant-folding"]
CASES = [  # (name, writer arguments, plan arguments)
    ("gpt", GPT,
     ["--devices", "8", "--global-batch", "32", "--seq", "128", "--memory-per-rank", "24M"]),
    # A tighter budget, where ppc compile refused a printed plan by its own estimate
    # (4x2x1, the optimizer offloaded: 20.6 MB, 17.5 exactly; the pricer leaked each
    # value sliced to a hint, and the exact memory plan did not decide).
    ("gpt-18M", GPT,
     ["--devices", "8", "--global-batch", "32", "--seq", "128", "--memory-per-rank", "18M"]),
    ("llama", [sys.executable, os.path.join(MODELS, "onnx_llama.py"), "--layers", "8",
               "--hidden", "128", "--heads", "4", "--kv-heads", "2", "--intermediate", "344",
               "--vocab", "512", "--seq", "128", "--batch", "0"],
     ["--devices", "8", "--global-batch", "32", "--memory-per-rank", "24M"]),
]
PEAK = re.compile(r"^  peak\s+.*\((\d+) B\)", re.M)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ppc", required=True)
    a = p.parse_args()
    a.ppc = os.path.abspath(a.ppc)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, writer, plan_args in CASES:
            model = os.path.join(tmp, name + ".onnx")
            out = ["--out", model] if "ppc_models" in writer[1] else ["-o", model]
            subprocess.run(writer + out, check=True, capture_output=True)
            plans_json = os.path.join(tmp, name + ".json")
            run = subprocess.run([a.ppc, "plan", model, "--top", "20", "--json", plans_json]
                                 + plan_args, capture_output=True, text=True)
            if run.returncode != 0:
                print(f"{name}: ppc plan failed:\n{run.stderr}")
                failures += 1
                continue
            plans = json.load(open(plans_json))["plans"]
            ratios = []
            for i, plan in enumerate(plans):
                argv = shlex.split(plan["command"])
                assert argv[:2] == ["ppc", "compile"]
                mlir = os.path.join(tmp, f"{name}-{i}.mlir")
                c = subprocess.run([a.ppc] + argv[1:] + ["--target", "cpu", "--emit", "mlir",
                                                         "-o", mlir],
                                   capture_output=True, text=True, cwd=tmp)
                mesh = f"{plan['dp']}x{plan['tp']}x{plan['pp']}"
                what = (f"{mesh:8s} ZeRO {plan['zero']} {plan['recompute']:9s} "
                        f"{plan['offload']:16s} m {plan['micro_batches']:3d} "
                        f"{plan['schedule'] or '-':11s} v{plan['virtual_stages']}")
                if c.returncode != 0:
                    print(f"{name} {what}: ppc compile failed: {c.stderr.strip()[-300:]}")
                    failures += 1
                    continue
                exact = max(int(x) for x in PEAK.findall(c.stderr))
                ratio = plan["peak_bytes"] / exact
                ratios.append(ratio)
                over = "more than --memory-per-rank" in c.stderr
                ok = UNDER <= ratio <= OVER and not over
                failures += not ok
                print(f"{name} {what}: predicted {plan['peak_bytes'] / 2**20:7.2f} MiB, "
                      f"compiled {exact / 2**20:7.2f} MiB, ratio {ratio:.2f}"
                      f"{' (over the budget)' if over else ''}{'' if ok else ' FAIL'}")
            if ratios:
                print(f"{name}: {len(ratios)} plans compiled; predicted/compiled peak: median "
                      f"{statistics.median(ratios):.2f}, lowest {min(ratios):.2f}, highest "
                      f"{max(ratios):.2f}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
