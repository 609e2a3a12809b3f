#!/usr/bin/env bash
# Bootstraps ppc, then does its main job on the shipped example model:
# compiles examples/gpt-tiny.onnx into a training executable for a 2x2x2 mesh
# (data x tensor x pipeline) on CPUs, trains it with `mpirun -np 8` on a text
# corpus (character level), shows the loss falling, and samples text from the
# trained model. Set STEPS (default 300) to train longer.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${PPC_BUILD_DIR:-$root/build}"
steps="${STEPS:-300}"
"$root/tools/bootstrap.sh"
ppc="$build/bin/ppc"
model="$root/examples/gpt-tiny.onnx"
corpus=/usr/share/common-licenses/GPL-3
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== ppc import $model --summary" >&2
"$ppc" import "$model" --summary

echo "== ppc compile $model --mesh 2x2x2 --target cpu -o train" >&2
"$ppc" compile "$model" --mesh 2x2x2 --target cpu --data-dtype u8 --micro-batches 4 \
  --batch 32 --lr 3e-3 -o "$work/train" 2>&1 | grep -E '^(compiled|warning|error)' >&2

echo "== mpirun -np 8 ./train --data $corpus --steps $steps" >&2
mpirun --allow-run-as-root --oversubscribe -np 8 "$work/train" --data "$corpus" \
  --steps "$steps" --log "$work/log.jsonl" --export "$work/trained.onnx" 2>&1 |
  awk -v every=$((steps / 10)) '/^step / { split($2, s, "/"); if (s[1] % every == 0 || s[1] == 1) print; next } { print }' >&2

/usr/bin/python3 - "$work/log.jsonl" <<'PY'
import json, sys
losses = [json.loads(line)["loss"] for line in open(sys.argv[1])]
first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
print(f"loss: {first:.3f} (first 10 steps) -> {last:.3f} (last 10)")
if not last < first:
    sys.exit("the loss did not fall")
PY

echo "== text sampled from the trained model (ppc eval, one character at a time)" >&2
/usr/bin/python3 "$root/models/sample.py" --ppc "$ppc" --model "$work/trained.onnx" \
  --prompt "The GNU General Public License " --chars 160
