#!/usr/bin/env python3
"""Crashes at random points, each followed by --resume: every resumed run
gives the uninterrupted run's loss trace bit for bit, and no partial
checkpoint is ever loaded.

    /usr/bin/python3 test/e2e/fault_injection.py --ppc build/bin/ppc [--runs 100]

A GPT executable on mesh 2 with ZeRO 1 trains 12 steps, saving every 2 and
keeping 2 (so pruning runs too). Each of --runs trials crashes one run in
one of two ways, drawn at random:

- a failpoint (runtime/Failpoint.h): one rank, or rank 0 for the commit's
  own points, ends with _exit(137) the K-th time it reaches a shard written
  to staging, an index written but not renamed, a rename not yet fsynced, or
  a prune between removing an index and the files;
- SIGKILL to one rank at a random moment once the run has opened its log (a rank killed
  inside MPI_Init can leave Open MPI's start-up waiting: not the executable's
  to catch).

Then `--resume` runs to step 12 (again if a crash left nothing to resume
from: it starts from step 0). The trial passes when the resumed run exits 0
without an error line and its log holds the reference losses bit for bit.
"""
import argparse
import concurrent.futures
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "models"))
import ppc_models  # noqa: E402

CORPUS = "/usr/share/common-licenses/GPL-3"
CFG = dict(vocab=256, d_model=32, n_layers=2, n_heads=4, seq=16, batch=4)
STEPS, EVERY, KEEP = 12, 2, 2
# Failpoint: (name, how many times a run reaches it, whether every rank does).
POINTS = [("shard-written", STEPS // EVERY, True), ("staging-complete", STEPS // EVERY, False),
          ("committed", STEPS // EVERY, False), ("pruning", STEPS // EVERY - KEEP, False)]


def command(exe, ckpt, log, resume):
    args = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", exe, "--data",
            CORPUS, "--steps", str(STEPS), "--checkpoint-dir", ckpt, "--save-every",
            str(EVERY), "--keep", str(KEEP), "--log", log, "--threads-per-rank", "1"]
    return args + (["--resume"] if resume else [])


def losses(log):
    return [json.loads(line)["loss"] for line in open(log)]


def trial(number, exe, tmp, reference, rng):
    work = os.path.join(tmp, f"trial-{number}")
    os.makedirs(work)
    ckpt, log = os.path.join(work, "ckpt"), os.path.join(work, "log.jsonl")
    env = dict(os.environ)
    if rng.random() < 0.7:
        name, reached, any_rank = rng.choice(POINTS)
        k = rng.randint(1, reached)
        rank = rng.randrange(2) if any_rank else 0
        env["PPC_FAILPOINT"] = f"{name}:{k}:{rank}"
        how = f"failpoint {name} #{k} on rank {rank}"
        crashed = subprocess.run(command(exe, ckpt, log, False), env=env, capture_output=True,
                                 text=True, timeout=120)
    else:
        delay = rng.uniform(0.0, 0.5)
        how = f"SIGKILL to a rank {delay:.2f} s after the log opened"
        proc = subprocess.Popen(command(exe, ckpt, log, False), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        # Killed once MPI is up (the log is open): a rank killed inside MPI_Init (the first
        # ~0.2 s) can leave Open MPI's start-up waiting for it, before the
        # executable's watchdog exists (noted in docs/architecture.md).
        while not os.path.exists(log) and proc.poll() is None:
            time.sleep(0.01)
        time.sleep(delay)
        # This trial's ranks only: trials run side by side from one executable.
        pids = subprocess.run(["pgrep", "-f", f"^{re.escape(exe)} .*{re.escape(ckpt)} "],
                              capture_output=True, text=True).stdout.split()
        if pids:
            try:
                os.kill(int(rng.choice(pids)), signal.SIGKILL)
            except ProcessLookupError:
                pass  # the rank ended between pgrep and the kill
        crashed = proc
        crashed.returncode = proc.wait(timeout=120)
    interrupted = crashed.returncode != 0
    resumed = subprocess.run(command(exe, ckpt, log, True), capture_output=True, text=True,
                             timeout=120)
    got = losses(log) if os.path.exists(log) else []
    errors = [line for line in resumed.stderr.splitlines() if line.startswith("error:")]
    ok = resumed.returncode == 0 and not errors and got == reference
    note = ("" if ok else f"\n  exit {resumed.returncode}, errors {errors}, "
            f"{len(got)} losses\n{resumed.stderr[-1500:]}")
    start = next((line for line in resumed.stderr.splitlines()
                  if line.startswith(("resuming from", "no checkpoint"))), "?")
    shutil.rmtree(work)
    return ok, interrupted, how, start.replace(tmp, "TMP"), note


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ppc", required=True)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "gpt.onnx")
        ppc_models.export("gpt", CFG, model, constant_folding=False)
        exe = os.path.join(tmp, "train")
        subprocess.run([args.ppc, "compile", model, "--mesh", "2", "--zero", "1", "--target",
                        "cpu", "--data-dtype", "u8", "--batch", "8", "--micro-batches", "2",
                        "--optimizer", "adamw", "-o", exe], check=True, capture_output=True)
        log = os.path.join(tmp, "reference.jsonl")
        subprocess.run(command(exe, os.path.join(tmp, "ref"), log, False), check=True,
                       capture_output=True)
        reference = losses(log)
        assert len(reference) == STEPS
        rngs = [random.Random(args.seed * 1000 + n) for n in range(args.runs)]
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda n: trial(n, exe, tmp, reference, rngs[n]),
                                    range(args.runs)))
    passed = sum(ok for ok, *_ in results)
    interrupted = sum(i for _, i, *_ in results)
    for ok, _, how, start, note in results[:8]:
        print(f"  {how}: then '{start}'{'' if ok else ' FAILED'}{note}")
    for ok, _, how, start, note in results[8:]:
        if not ok:
            print(f"  {how}: then '{start}' FAILED{note}")
    print(f"{args.runs} crashed runs ({interrupted} interrupted before the end), "
          f"{passed} resumed to the uninterrupted trace bit for bit, "
          f"{args.runs - passed} failed")
    assert passed == args.runs
    print("OK")


if __name__ == "__main__":
    main()
