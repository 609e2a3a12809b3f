#!/usr/bin/env python3
"""What a training executable refuses: corrupted checkpoints, each naming the
file at fault, and runs that diverge.

    /usr/bin/python3 test/e2e/exe_faults.py --ppc build/bin/ppc [--flips 100]

A GPT executable on mesh 2 with ZeRO 1 (so the two ranks' shards differ)
saves checkpoints at steps 2 and 4. Each case then damages a copy of that
directory and runs `--resume`:

- bit flips at random positions of a shard, half in the safetensors header
  and half in the tensor data (--flips of them, one run each);
- a shard truncated, extended with trailing bytes, the two ranks' shards
  swapped, step 2's shard put in step 4;
- step 4's index truncated, naming another step, listing one shard too few,
  with one digit of a digest changed, or with rank 1's entry malformed
  (which every rank must refuse alike, or the others would wait forever).

Every one must exit non-zero with an `error:` line naming the shard or index.
A step directory without index.json (a prune stopped midway) is the one
case that falls back: the run says it skips it, resumes from step 2 and,
saving as it goes, replaces it at step 4; its losses equal an uninterrupted
run's, and a line of its log that is not JSON is kept as it was.

A run that diverges (--lr 1e30) stops at the first step whose loss or
gradient norm is not finite, on every rank, with one error line naming the
step (counted from 1, as the progress line does) and the rank, and its log
stays JSON (null for the non-finite values). `ppc simulate` (--lr 1e300: it
computes in f64) stops alike. A data file truncated while a run maps it stops
the run with an error naming it, not a bus error. A finite loss whose gradients overflow (initial
weights with ln_f scaled by 1e25) also names the first state tensor (in key
order, over all ranks) the step left non-finite. A checkpoint or --export that cannot be
written is one error line, without Open MPI's abort banner, and so is a
token id outside the vocabulary that one rank alone reads mid-run.
"""
import argparse
import concurrent.futures
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "models"))
import ppc_models  # noqa: E402

CORPUS = "/usr/share/common-licenses/GPL-3"
CFG = dict(vocab=256, d_model=32, n_layers=2, n_heads=4, seq=16, batch=4)
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
SHARDS = ["rank-00000.safetensors", "rank-00001.safetensors"]


def run(exe, ckpt, log, steps=6, resume=True, save=False):
    args = MPIRUN + [exe, "--data", CORPUS, "--steps", str(steps), "--checkpoint-dir", ckpt,
                     "--log", log, "--threads-per-rank", "1"]
    if resume:
        args.append("--resume")
    if save or not resume:
        args += ["--save-every", "2"]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def losses(log):
    return [json.loads(line)["loss"] for line in open(log)]


def header_bytes(path):
    with open(path, "rb") as f:
        return 8 + struct.unpack("<Q", f.read(8))[0]


def flip(path, position, bit):
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)[0]
        f.seek(position)
        f.write(bytes([byte ^ (1 << bit)]))


def strict_json(line):
    """json.loads that refuses NaN and Infinity, which are not JSON."""
    def refuse(token):
        raise ValueError(f"{token} is not JSON")
    return json.loads(line, parse_constant=refuse)


def diverge(ppc, exe, model, tmp):
    log = os.path.join(tmp, "diverge.jsonl")
    result = subprocess.run(MPIRUN + [exe, "--data", CORPUS, "--steps", "10", "--log", log,
                                      "--lr", "1e30", "--threads-per-rank", "1"],
                            capture_output=True, text=True, timeout=120)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    print(f"--lr 1e30: exit {result.returncode}, {errors}")
    assert result.returncode != 0 and len(errors) == 1, result.stderr
    m = re.fullmatch(r"error: step (\d+) \(rank \d+\): the (loss|gradient norm) is "
                     r"(NaN|infinite)(; the first tensor it left non-finite is "
                     r"'(param|state:\w+):[\w.]+')?; stopping every rank", errors[0])
    # A tensor is named only after a finite loss (after a NaN loss every
    # gradient is NaN).
    assert m and bool(m.group(4)) == (m.group(2) == "gradient norm"), errors
    lines = [strict_json(line) for line in open(log)]
    assert len(lines) == int(m.group(1)), (len(lines), m.group(1))
    last = lines[-1]["loss" if m.group(2) == "loss" else "grad_norm"]
    assert last is None, lines[-1]
    print(f"  its log: {len(lines)} JSON lines, the last with {m.group(2)} null")

    # A finite loss whose gradients overflow (ln_f's weight scaled by 1e25:
    # gradients near 1e24, their squares past f32): the error names the
    # first state tensor the step left non-finite, Adam's second moment.
    hot = os.path.join(tmp, "hot.safetensors")
    with open(exe + ".weights.safetensors", "rb") as f:
        raw = f.read()
    size = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + size])
    begin, end = header["ln_f.weight"]["data_offsets"]
    data = bytearray(raw[8 + size:])
    count = (end - begin) // 4
    values = [v * 1e25 for v in struct.unpack(f"<{count}f", data[begin:end])]
    data[begin:end] = struct.pack(f"<{count}f", *values)
    with open(hot, "wb") as f:
        f.write(raw[:8 + size] + bytes(data))
    result = subprocess.run(MPIRUN + [exe, "--data", CORPUS, "--steps", "3", "--weights", hot,
                                      "--threads-per-rank", "1"],
                            capture_output=True, text=True, timeout=120)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    print(f"ln_f.weight x 1e25: exit {result.returncode}, {errors}")
    assert result.returncode != 0 and len(errors) == 1, result.stderr
    assert re.fullmatch(r"error: step 1 \(rank \d+\): the gradient norm is infinite; the first "
                        r"tensor it left non-finite is 'state:exp_avg_sq:[\w.]+'; stopping every "
                        r"rank", errors[0]), errors
    sim_log = os.path.join(tmp, "diverge.sim.jsonl")
    result = subprocess.run([ppc, "simulate", model, "--mesh", "2", "--zero", "1", "--data",
                             CORPUS, "--data-dtype", "u8", "--batch", "8", "--micro-batches", "2", "--optimizer",
                             "adamw", "--lr", "1e300", "--steps", "10", "--log", sim_log],
                            capture_output=True, text=True, timeout=300)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    # The executor computes in f64, where 1e30 does not overflow yet.
    print(f"ppc simulate --lr 1e300: exit {result.returncode}, {errors}")
    assert result.returncode == 1 and len(errors) == 1, result.stderr
    m = re.fullmatch(r"error: step (\d+): the (loss|gradient norm) is (NaN|infinite)",
                     errors[0])
    assert m, errors
    assert len([strict_json(line) for line in open(sim_log)]) == int(m.group(1))


def shrinking_data(exe, tmp):
    """The data file truncated while a run reads it (it is memory-mapped, so
    the next read past the new end raises SIGBUS): the run stops with an
    error naming the file, not a bus error."""
    data = os.path.join(tmp, "data.u8")
    shutil.copy(CORPUS, data)
    log = os.path.join(tmp, "shrink.jsonl")
    proc = subprocess.Popen(MPIRUN + [exe, "--data", data, "--steps", "1000000", "--log", log,
                                      "--threads-per-rank", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and (not os.path.exists(log) or
                                      sum(1 for _ in open(log)) < 3):
        time.sleep(0.05)
    os.truncate(data, 0)
    _, err = proc.communicate(timeout=60)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    named = [line for line in errors if "data file '" + data + "' became shorter" in line]
    print(f"data file truncated mid-run: exit {proc.returncode}, {named[:1]}")
    assert proc.returncode != 0 and named and "Bus error" not in err, err[-2000:]


def unwritable(exe, tmp):
    """A checkpoint or export that cannot be written on one rank ends every
    rank through one collective: one error line, and no MPI_Abort banner."""
    blocker = os.path.join(tmp, "a-file")
    open(blocker, "w").close()
    for what, extra in (("checkpoint", ["--checkpoint-dir", os.path.join(blocker, "ckpt"),
                                        "--save-every", "1"]),
                        ("export", ["--export", os.path.join(blocker, "out.onnx")])):
        result = subprocess.run(MPIRUN + [exe, "--data", CORPUS, "--steps", "1",
                                          "--threads-per-rank", "1", *extra],
                                capture_output=True, text=True, timeout=120)
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        print(f"unwritable {what}: exit {result.returncode}, {errors}")
        assert result.returncode != 0 and len(errors) == 1, result.stderr
        assert "Not a directory" in errors[0] and "MPI_ABORT" not in result.stderr, result.stderr


def bad_token(ppc, tmp):
    """A token id outside the vocabulary, read by rank 1 alone at step 3: the
    CPU gather records it and the step ends on every rank through one
    collective, with one error line naming the step, the rank and the node,
    and no MPI_Abort banner."""
    model = os.path.join(tmp, "gpt128.onnx")
    ppc_models.export("gpt", dict(CFG, vocab=128), model, constant_folding=False)
    exe = os.path.join(tmp, "train128")
    subprocess.run([ppc, "compile", model, "--mesh", "2", "--target", "cpu", "--data-dtype",
                    "u8", "--batch", "8", "--micro-batches", "2", "-o", exe],
                   check=True, capture_output=True)
    # Step s (from 0), sample b starts at token (s*8 + b) * seq; rank 1 holds
    # samples 4..7, so at step 3 tokens 320..384 are its alone.
    data = bytearray((i * 7) % 128 for i in range(4096))
    data[340] = 200
    path = os.path.join(tmp, "tokens-bad.bin")
    with open(path, "wb") as f:
        f.write(bytes(data))
    result = subprocess.run(MPIRUN + [exe, "--data", path, "--steps", "5",
                                      "--threads-per-rank", "1"],
                            capture_output=True, text=True, timeout=120)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    print(f"token 200 of a 128-token vocabulary: exit {result.returncode}, {errors}")
    assert result.returncode != 0 and len(errors) == 1, result.stderr
    assert re.fullmatch(r"error: step 3 \(rank 1\): node '[^']+' \(gather\): an index is out "
                        r"of range", errors[0]), errors
    assert "MPI_ABORT" not in result.stderr and "step 3/5" not in result.stderr, result.stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ppc", required=True)
    parser.add_argument("--flips", type=int, default=100)
    args = parser.parse_args()
    rng = random.Random(20)
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "gpt.onnx")
        ppc_models.export("gpt", CFG, model, constant_folding=False)
        exe = os.path.join(tmp, "train")
        subprocess.run([args.ppc, "compile", model, "--mesh", "2", "--zero", "1", "--target",
                        "cpu", "--data-dtype", "u8", "--batch", "8", "--micro-batches", "2",
                        "--optimizer", "adamw",
                        "-o", exe], check=True, capture_output=True)
        pristine = os.path.join(tmp, "pristine")
        whole = os.path.join(tmp, "whole.jsonl")
        first = run(exe, pristine, whole, steps=4, resume=False)
        assert first.returncode == 0, first.stderr
        reference = os.path.join(tmp, "reference.jsonl")
        assert run(exe, os.path.join(tmp, "ref"), reference, steps=6,
                   resume=False).returncode == 0
        index = json.load(open(os.path.join(pristine, "step-00000004", "index.json")))
        assert index["version"] == 3 and [f["name"] for f in index["files"]] == SHARDS, index["version"]
        # Each case damages its own copy (relative paths below are under
        # its step 4), so four run at once: a run is mostly mpirun's start.
        def attempt(number, label, damage, culprit):
            work = os.path.join(tmp, f"case-{number}")
            shutil.copytree(pristine, work)
            step4 = os.path.join(work, "step-00000004")
            damage(step4)
            log = os.path.join(work, "resumed.jsonl")
            shutil.copy(whole, log)
            result = run(exe, work, log)
            shutil.rmtree(work)
            errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
            named = len(errors) == 1 and os.path.join(step4, culprit) in errors[0]
            detected = result.returncode != 0 and named
            if not detected:
                print(f"NOT DETECTED: {label} (exit {result.returncode})\n{result.stderr[-2000:]}")
            return detected, errors[0].replace(tmp, "TMP") if errors else ""

        cases = []
        for k in range(args.flips):
            name = SHARDS[k % 2]
            size = os.path.getsize(os.path.join(pristine, "step-00000004", name))
            head = header_bytes(os.path.join(pristine, "step-00000004", name))
            position = rng.randrange(head) if k < args.flips // 2 else rng.randrange(head, size)
            bit = rng.randrange(8)
            cases.append((f"flip bit {bit} of byte {position} of {name}"
                          f" ({'header' if position < head else 'data'})",
                          lambda d, n=name, p=position, b=bit: flip(os.path.join(d, n), p, b),
                          name))
        s0, s1 = SHARDS

        def truncate(path, keep):
            with open(path, "r+b") as f:
                f.truncate(keep(os.path.getsize(path)))

        def append(path):
            with open(path, "ab") as f:
                f.write(b"\0" * 8)

        def swap(d):
            os.rename(os.path.join(d, s0), os.path.join(d, "tmp"))
            os.rename(os.path.join(d, s1), os.path.join(d, s0))
            os.rename(os.path.join(d, "tmp"), os.path.join(d, s1))

        def edit_index(d, change):
            path = os.path.join(d, "index.json")
            text = open(path).read()
            open(path, "w").write(change(text))

        def digit(text):
            entry = json.loads(text)
            d = entry["files"][1]["blake3"]
            entry["files"][1]["blake3"] = ("0" if d[0] != "0" else "1") + d[1:]
            return json.dumps(entry)

        cases += [
            ("shard truncated by one byte",
             lambda d: truncate(os.path.join(d, s1), lambda n: n - 1), s1),
            ("shard truncated to half",
             lambda d: truncate(os.path.join(d, s0), lambda n: n // 2), s0),
            ("trailing bytes after a shard", lambda d: append(os.path.join(d, s0)), s0),
            ("the ranks' ZeRO shards swapped", swap, s0),
            ("step 2's shard in step 4", lambda d: shutil.copy(
                os.path.join(d, "..", "step-00000002", s1), os.path.join(d, s1)), s1),
            ("index truncated", lambda d: edit_index(d, lambda t: t[:len(t) // 2]),
             "index.json"),
            ("index naming step 3", lambda d: edit_index(
                d, lambda t: json.dumps(dict(json.loads(t), step=3))), "index.json"),
            ("index listing one shard", lambda d: edit_index(d, lambda t: json.dumps(
                dict(json.loads(t), files=json.loads(t)["files"][:1]))), "index.json"),
            ("one digit of a digest changed", lambda d: edit_index(d, digit), s1),
            # Every rank must reach the same verdict on the index, or the
            # ranks that found nothing wrong wait for the others forever.
            ("rank 1's index entry without its digest", lambda d: edit_index(d, lambda t: json.dumps(
                dict(json.loads(t), files=[json.loads(t)["files"][0],
                                           {"name": s1, "bytes": 1}]))), "index.json"),
        ]
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda c: attempt(c[0], *c[1]), enumerate(cases)))
        print(f"{len(cases)} damaged checkpoints:")
        flips = 0
        for (label, _, _), (ok, error) in zip(cases, results):
            if label.startswith("flip"):
                flips += 1
                if flips > 2:
                    continue
            print(f"  {label}: {error}")
        print(f"  ... and {flips - 2} more bit flips")
        detected = sum(ok for ok, _ in results)
        print(f"detected {detected} of {len(cases)}, each with one error line naming the file "
              "at fault")
        assert detected == len(cases)

        work = os.path.join(tmp, "ckpt")
        step4 = os.path.join(work, "step-00000004")
        # The one fallback: step 4 without its index resumes from step 2.
        shutil.copytree(pristine, work)
        os.remove(os.path.join(step4, "index.json"))
        log = os.path.join(tmp, "fallback.jsonl")
        with open(whole) as src, open(log, "w") as dst:
            dst.writelines(src.readlines()[:2] + ["a line that is not JSON\n"])
        # Saving as it goes: the run reaches step 4 again and replaces the
        # directory the prune left.
        result = run(exe, work, log, save=True)
        assert result.returncode == 0, result.stderr
        assert os.path.exists(os.path.join(step4, "index.json")), "step 4 not saved again"
        skip = re.search(r"^skipping .*step-00000004: .*$", result.stderr, re.M)
        assert skip and "resuming from" in result.stderr, result.stderr
        print(f"no index in step 4: '{skip.group(0)}', then resumed from step 2")
        lines = open(log).read().splitlines()
        assert lines[2] == "a line that is not JSON", lines
        del lines[2]
        got = [json.loads(line)["loss"] for line in lines]
        assert got == losses(reference), (got, losses(reference))
        print("its losses equal an uninterrupted run's, bit for bit; the line that is not "
              "JSON was kept")

        diverge(args.ppc, exe, model, tmp)
        unwritable(exe, tmp)
        bad_token(args.ppc, tmp)
        shrinking_data(exe, tmp)
    print("OK")


if __name__ == "__main__":
    main()
