"""Calibration: the cost model's predicted step time against the compiled CPU
executables' measured one, on this machine's MPI ranks, for several layouts.

For each rank count it first measures the CPU device table with
ppc-calibrate-cpu under mpirun (GEMM rate, memory bandwidth, MPI all-reduce
latency and bus bandwidth, every rank at once on its share of the cores, as
the executables run), and writes it as a cluster file. Then, for each layout,
`ppc plan --mesh L ... --cluster that-file` prices it (the prediction) and
prints its ppc compile line, which is compiled for the CPU target and run
under mpirun (the measurement: rank 0's median step time after a warm-up
step, the median of --runs runs). It prints the error of each layout, the worst
and the median.

    /usr/bin/python3 bench/calibrate_cpu.py --ppc build/bin/ppc \\
        --calibrate build/bin/ppc-calibrate-cpu [--layouts 1x1x1:z0:m1,2x1x1:z0:m1,...]
        [--layers 4 --d-model 256 --heads 4 --seq 128 --global-batch 16 --steps 8 --runs 3]
        [--json results.json]

A layout is DPxTPxPP:zZERO:mMICROBATCHES. Timings need a quiet machine.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import ppc_models  # noqa: E402

CORPUS = "/usr/share/common-licenses/GPL-3"
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
DEFAULT_LAYOUTS = ("1x1x1:z0:m1,2x1x1:z0:m1,1x2x1:z0:m1,1x1x2:z0:m4,2x2x1:z1:m1,2x1x2:z0:m4,"
                   "1x2x2:z0:m4,4x1x1:z1:m1,2x2x2:z1:m2,8x1x1:z0:m1,4x2x2:z1:m2,16x1x1:z1:m1")


def parse_layout(text):
    mesh, zero, micro = text.split(":")
    dp, tp, pp = (int(x) for x in mesh.split("x"))
    assert zero[0] == "z" and micro[0] == "m", text
    return dict(mesh=mesh, dp=dp, tp=tp, pp=pp, zero=int(zero[1:]), micro=int(micro[1:]))


def run(cmd, timeout=1800, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr[-3000:]}")
    return done


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ppc", required=True)
    p.add_argument("--calibrate", required=True, help="ppc-calibrate-cpu")
    p.add_argument("--layouts", default=DEFAULT_LAYOUTS)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--global-batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=8, help="steps per run (the first is not timed)")
    p.add_argument("--runs", type=int, default=3, help="runs of each executable")
    p.add_argument("--json", help="write every layout's figures here")
    p.add_argument("--keep", help="keep the cluster files, plans and logs in this directory")
    args = p.parse_args()
    layouts = [parse_layout(t) for t in args.layouts.split(",")]
    cfg = dict(vocab=256, d_model=args.d_model, n_layers=args.layers, n_heads=args.heads,
               seq=args.seq, batch=args.global_batch)
    tmp_holder = None if args.keep else tempfile.TemporaryDirectory()
    tmp = args.keep or tmp_holder.name
    os.makedirs(tmp, exist_ok=True)
    model = os.path.join(tmp, "gpt.onnx")
    ppc_models.export("gpt", cfg, model, constant_folding=False, dynamic=True)
    clusters, results = {}, []
    for layout in layouts:
        n = layout["dp"] * layout["tp"] * layout["pp"]
        if n not in clusters:
            path = os.path.join(tmp, f"cpu-{n}.json")
            run(MPIRUN + ["-np", str(n), args.calibrate, "-o", path])
            clusters[n] = path
            table = json.load(open(path))
            print(f"# {n} ranks: {table['source']}", flush=True)
        plan_json = os.path.join(tmp, f"plan-{layout['mesh']}.json")
        pins = ["--mesh", layout["mesh"], "--zero", str(layout["zero"]), "--micro-batches",
                str(layout["micro"]), "--recompute", "none", "--offload", "none"]
        if layout["pp"] > 1:
            pins += ["--schedule", "1f1b"]
        run([args.ppc, "plan", model, "--seq", str(args.seq), "--global-batch",
             str(args.global_batch), "--cluster", clusters[n], "--top", "1", "--json",
             plan_json] + pins)
        plan = json.load(open(plan_json))["plans"][0]
        exe = os.path.join(tmp, "train-" + layout["mesh"])
        command = plan["command"].split()
        assert command[:2] == ["ppc", "compile"], plan["command"]
        start = time.perf_counter()
        run([args.ppc] + command[1:] + ["--target", "cpu", "--data-dtype", "u8", "-o", exe])
        built = time.perf_counter() - start
        # Each run's median step after the first; the median of the runs (this
        # machine's speed drifts from minute to minute: the runs' range is kept).
        runs = []
        for r in range(args.runs):
            log = os.path.join(tmp, f"log-{layout['mesh']}-{r}.jsonl")
            run(MPIRUN + ["-np", str(n), exe, "--data", CORPUS, "--steps", str(args.steps),
                          "--log", log])
            lines = [json.loads(line) for line in open(log)]
            runs.append(statistics.median(l["step_time"] for l in lines[1:]))
        measured = statistics.median(runs)
        predicted = plan["step_seconds"]
        error = predicted / measured - 1
        row = dict(layout=layout, ranks=n, predicted=predicted, measured=measured, runs=runs,
                   error=error, comm_share=plan["comm_seconds"] / predicted,
                   bubble_share=plan["bubble_seconds"] / predicted,
                   sequence_parallel=plan["sequence_parallel"], built_seconds=built)
        results.append(row)
        print(f"{layout['mesh']:>8} ZeRO {layout['zero']} {layout['micro']:>2} micro-batches"
              f"{' SP' if plan['sequence_parallel'] else '   '}: predicted {predicted * 1e3:7.1f} ms,"
              f" measured {measured * 1e3:7.1f} ms ({min(runs) * 1e3:.0f}-{max(runs) * 1e3:.0f}"
              f" over {len(runs)} runs), error {100 * error:+6.1f}% (predicted comm"
              f" {100 * row['comm_share']:.0f}%, bubble {100 * row['bubble_share']:.0f}%)",
              flush=True)
    errors = [abs(r["error"]) for r in results]
    worst = max(results, key=lambda r: abs(r["error"]))
    print(f"{len(results)} layouts: median |error| {100 * statistics.median(errors):.1f}%, worst "
          f"{100 * worst['error']:+.1f}% ({worst['layout']['mesh']})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(model=cfg, results=results), f, indent=1)


if __name__ == "__main__":
    main()
