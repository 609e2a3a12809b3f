#!/usr/bin/env python3
"""Offload (--offload) moves memory from the device to the host, never the numbers.

    /usr/bin/python3 test/e2e/offload_parity.py --ppc build/bin/ppc

1. `ppc simulate` with --offload optimizer and optimizer+params gives the loss
   and gradient-norm trace of no offload bit for bit (the same ops on the same
   values: a transfer is a copy), on GPT, LLaMA and BERT over meshes 1, 2x2
   with ZeRO 1, 2x2 with ZeRO 3 and 2x2x2, with two micro-batches. The
   executor's measured device peak goes down, and (meshes of more than one
   rank) the memory plan `ppc compile --report` carries equals what the
   executor measured, on the device and on the host, rank by rank (f32:
   exact).
2. The CUDA emulator's executables (which keep the host arena in page-locked
   memory, refuse a copy whose host side is device memory, and a kernel given
   a pointer into host memory) give no offload's trace bit for bit: GPT on
   2x2 with ZeRO 3 and optimizer+params, GPT on 2x2x2 with optimizer, LLaMA
   on 4 with bf16, ZeRO 1 and optimizer+params, and GPT on 1 with full
   recomputation and optimizer+params. The logging rank's device memory (the
   emulator's allocations) goes down by its arena's shrinking plus its
   optimizer state (and parameters), no longer held there between steps; its
   host memory is its host arena plus at least that state.
3. The CPU target runs it too (one memory: the transfers are copies).
4. The planner chooses offload (--offload auto, the default) only where no
   plan fits without: GPT on 2x2, under budgets from what the plan without
   offload needs down by 10%, gets a plan with offload before any budget
   fails; its simulated device and host peaks fit, and its losses are those
   of one device (relative 1e-5). Under the default budget nothing is
   offloaded.
"""
import argparse
import concurrent.futures
import json
import os
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
MESHES = [("1", []), ("2x2", ["--zero", "1"]), ("2x2", ["--zero", "3"]), ("2x2x2", [])]
MODES = ["optimizer", "optimizer+params"]


def run(args):
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args[:6])} ... failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def ranks(mesh):
    n = 1
    for a in mesh.split("x"):
        n *= int(a)
    return n


def trace(lines):
    return [(l["loss"], l["grad_norm"]) for l in lines]


def simulate(ppc, model, tmp, tag, mesh, extra):
    log = os.path.join(tmp, f"{tag}.jsonl")
    run([ppc, "simulate", model, "--mesh", mesh, "--data", CORPUS, "--steps", "3", "--log", log]
        + TRAINING + extra)
    return [json.loads(l) for l in open(log)]


def planned(ppc, model, tmp, tag, mesh, extra):
    """Each rank's planned (device, host) peak, from --report's plans."""
    report = os.path.join(tmp, f"{tag}.json")
    # The CPU target's program is simulate's (the CUDA target's recomputes
    # pointwise values in the gradients' kernels, and keeps less).
    run([ppc, "compile", model, "--mesh", mesh, "--target", "cpu", "--emit", "mlir", "-o",
         os.path.join(tmp, f"{tag}.mlir"), "--report", report] + TRAINING + extra)
    report = json.load(open(report))
    plans = [p["memory"] for p in report.get("pipeline_ranks", [report])]
    # Ranks are pipeline-major: each program serves ranks() / pp ranks in a row.
    per = ranks(mesh) // len(plans)
    return [(m["peak_bytes"], m.get("host_peak_bytes", 0)) for m in plans for _ in range(per)]


def simulate_case(ppc, kind, tmp):
    model = os.path.join(tmp, f"{kind}.onnx")
    ppc_models.export(kind, CFG, model, constant_folding=False)
    for mesh, zero in MESHES:
        name = f"{kind}-{mesh}{''.join(zero)}"
        base = simulate(ppc, model, tmp, f"{name}-none", mesh, zero)
        row = [f"{kind:6} {mesh:6} {' '.join(zero) or '':8}"]
        for mode in MODES:
            extra = zero + ["--offload", mode]
            lines = simulate(ppc, model, tmp, f"{name}-{mode}", mesh, extra)
            assert trace(lines) == trace(base), f"{name} {mode}:\n{trace(lines)}\n{trace(base)}"
            device = lines[-1]["peak_bytes_per_rank"]
            host = lines[-1]["host_peak_bytes_per_rank"]
            # (--report needs a mesh of more than one rank.)
            if mesh != "1":
                plan = planned(ppc, model, tmp, f"{name}-{mode}", mesh, extra)
                assert plan == list(zip(device, host)), (name, mode, plan, device, host)
            assert max(device) < max(base[-1]["peak_bytes_per_rank"]), (name, mode, device)
            row.append(f"{mode}: identical, device {max(device)}, host {max(host)}")
        print("  ".join(row) + f"  (none: device {max(base[-1]['peak_bytes_per_rank'])})")


def held_bytes(ppc, model, tmp, tag, mesh, extra, params):
    """Per program, the bytes of the state a rank holds between steps that
    offload moves to the host: its optimizer state ('state:' arguments), and
    with `params` its parameters."""
    import re
    ir = os.path.join(tmp, f"{tag}-state.mlir")
    run([ppc, "compile", model, "--mesh", mesh, "--emit", "mlir", "-o", ir] + TRAINING + extra)
    attrs = r"ppc\.(?:state|param) = " if params else r"ppc\.state = "
    held = set()
    for func in re.finditer(r"func\.func @(\w+)\((.*?)\) ->", open(ir).read()):
        size = 0
        for shape, dtype in re.findall(r"tensor<([0-9x]*?)x?(f32|bf16)> \{[^}]*" + attrs,
                                       func.group(2)):
            n = 1
            for d in filter(None, shape.split("x")):
                n *= int(d)
            size += n * (2 if dtype == "bf16" else 4)
        held.add(size)
    return held


def build(ppc, model, tmp, tag, mesh, target, extra):
    run([ppc, "compile", model, "--mesh", mesh, "--target", target, "-o",
         os.path.join(tmp, f"{tag}-exe")] + TRAINING + extra)


def executable(tmp, tag, mesh):
    exe = os.path.join(tmp, f"{tag}-exe")
    log = os.path.join(tmp, f"{tag}-exe.jsonl")
    run(MPIRUN + ["-np", str(ranks(mesh)), exe, "--data", CORPUS, "--steps", "3", "--log", log])
    return [json.loads(l) for l in open(log)]


def executable_case(ppc, tmp, kind, mesh, extra, mode, target):
    model = os.path.join(tmp, f"{kind}.onnx")
    if not os.path.exists(model):
        ppc_models.export(kind, CFG, model, constant_folding=False)
    tag = f"{kind}-{target}-{mesh}-{'-'.join(extra)}".replace("+", "")
    # The two builds (a compiler process each) side by side.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as builds:
        for built in [builds.submit(build, ppc, model, tmp, f"{tag}-none", mesh, target, extra),
                      builds.submit(build, ppc, model, tmp, f"{tag}-{mode}", mesh, target,
                                    extra + ["--offload", mode])]:
            built.result()
    base = executable(tmp, f"{tag}-none", mesh)
    lines = executable(tmp, f"{tag}-{mode}", mesh)
    assert trace(lines) == trace(base), f"{tag} {mode}:\n{trace(lines)}\n{trace(base)}"
    last, before = lines[-1], base[-1]
    note = ""
    if target == "cuda-emulator":
        # The logging rank's device memory (the emulator's allocations) goes
        # down by exactly its arena's shrinking: the state lives in the arena
        # (its arguments' buffers), on the host's side once offloaded, where
        # the host holds nothing beside its arena, which holds at least the
        # state offload moved there (that of one of the programs: the logging
        # rank's; with params, its parameters too).
        options = held_bytes(ppc, model, tmp, tag, mesh, extra, mode == "optimizer+params")
        saved = before["memory_bytes"] - last["memory_bytes"]
        arena = before["arena_bytes"] - last["arena_bytes"]
        assert arena > 0 and saved == arena, (tag, saved, arena)
        host = last["host_arena_bytes"]
        assert last["host_memory_bytes"] == host and host >= min(options), (tag, last, options)
        note = (f", device memory {before['memory_bytes']} -> {last['memory_bytes']} "
                f"(arena -{arena}), host memory {last['host_memory_bytes']} (its arena, "
                f"holding the {min(options)}..{max(options)} bytes of state offloaded)")
    print(f"{kind:6} {target:13} {mesh:6} {' '.join(extra):28} --offload {mode}: "
          f"identical to none{note}")


def planner_case(ppc, tmp, kind="gpt", mesh="2x2"):
    model = os.path.join(tmp, f"{kind}.onnx")
    one = simulate(ppc, model, tmp, f"{kind}-planner-1", "1", [])
    default = simulate(ppc, model, tmp, f"{kind}-planner-default", mesh, [])
    assert "host_peak_bytes_per_rank" not in default[-1], default[-1]
    budget = max(default[-1]["peak_bytes_per_rank"])
    for _ in range(20):
        budget = int(budget * 0.9)
        ir = os.path.join(tmp, "planner.mlir")
        proc = subprocess.run([ppc, "compile", model, "--mesh", mesh, "--memory-per-rank",
                               str(budget), "--emit", "mlir", "-o", ir] + TRAINING,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"no plan with offload before the budget failed:\n{proc.stderr}")
        chosen = [l for l in proc.stderr.splitlines() if l.startswith("plan:")]
        if "offload" in chosen[0]:
            break
    else:
        sys.exit("the planner never chose offload")
    lines = simulate(ppc, model, tmp, f"{kind}-planner", mesh, ["--memory-per-rank", str(budget)])
    error = max(abs(a[0] - b[0]) / abs(b[0]) for a, b in zip(trace(lines), trace(one)))
    device = max(lines[-1]["peak_bytes_per_rank"])
    host = max(lines[-1]["host_peak_bytes_per_rank"])
    print(f"{kind} {mesh} under {budget} bytes: {chosen[0]}\n  simulated: device peak "
          f"{device}, host peak {host}; worst relative loss error against one device "
          f"{error:.1e}")
    assert device <= budget and error <= 1e-5, (device, budget, error)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ppc", required=True)
    args = parser.parse_args()
    help_text = run([args.ppc, "compile", "--help"]).stdout
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("gpt", "llama", "bert"):
            simulate_case(args.ppc, kind, tmp)
        if "cuda-emulator" in help_text:
            executable_case(args.ppc, tmp, "gpt", "2x2", ["--zero", "3"], "optimizer+params",
                            "cuda-emulator")
            executable_case(args.ppc, tmp, "gpt", "2x2x2", [], "optimizer", "cuda-emulator")
            executable_case(args.ppc, tmp, "llama", "4", ["--zero", "1", "--precision", "bf16"],
                            "optimizer+params", "cuda-emulator")
            executable_case(args.ppc, tmp, "gpt", "1", ["--recompute", "full"],
                            "optimizer+params", "cuda-emulator")
        else:
            print("ppc has no CUDA emulator target: the executables are not checked there")
        executable_case(args.ppc, tmp, "gpt", "2x2", ["--zero", "1"], "optimizer", "cpu")
        planner_case(args.ppc, tmp)


if __name__ == "__main__":
    main()
