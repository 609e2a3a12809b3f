#!/usr/bin/env python3
"""Hugging Face transformers families trained by ppc against PyTorch.

Tiny models of each family are built from a config with the library's own random
initialisation (no download; every dropout probability set to 0, which ppc needs),
then exported two ways:

* **helper**: python/ppc_export.py (training mode, no constant folding, the
  ``ppc.training`` record). For each family: ``ppc simulate --mesh 1`` against the same
  model trained by PyTorch (worst relative loss error over 20 AdamW steps, limit 1e-4,
  DESIGN.md section 5); meshes (2x2, 2x2x2, pinned tensor-parallel layouts, a pipeline
  with ZeRO) against mesh 1 (limit 1e-5); and, for some families, compiled executables
  under mpirun (CPU, and CUDA on ppc's emulator) against simulate (1e-5).
* **default**: ``torch.onnx.export`` with its defaults (eval mode, constant folding).
  ppc must either train exactly what PyTorch trains, or print a ``warning:`` line that
  names the merged or split initializer. Training silently wrong is a failure.

Before the families (when no --only is given), the helper's record is checked: GPT-2's
tie recorded, a parameter with requires_grad=False frozen and trained as torch trains it
(not at all), and a model with dropout 0.1 refused. And mixed precision on GPT-2 and
LLaMA as Hugging Face builds them: `--precision bf16` trains within BF16_LIMIT of f32
training over 20 steps (bf16's own noise), and its first loss is printed beside the
model's own in bf16 in PyTorch; `--precision fp16` trains (finite losses, the first
steps skipped while the scale drops from 65536).

Runs under an interpreter that has transformers 4.36.2 over Debian's torch 1.13;
tools/hf_venv.sh makes one (the ctest does). Prints one table row per family.

    build/hf-venv/bin/python test/e2e/hf_families.py --ppc build/bin/ppc [--only gpt2,llama]
"""
import argparse
import copy
import json
import math
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import ppc_export  # noqa: E402

warnings.filterwarnings("ignore")
import transformers as T  # noqa: E402

T.logging.set_verbosity_error()

CORPUS = "/usr/share/common-licenses/GPL-3"
V, BATCH, SEQ, STEPS = 256, 4, 16, 20
TORCH_LIMIT = 1e-4     # DESIGN.md section 5: ppc against PyTorch
MESH_LIMIT = 1e-5      # any mesh against one device, and executables against simulate
# --precision bf16 on GPT-2 and LLaMA against f32 training over 20 steps (measured
# 5.2e-4 and 7.6e-4: bf16 itself). The first loss is not held to the model run in bf16
# by PyTorch: Hugging Face's code computes LLaMA's RMSNorm and softmax in f32 inside a
# bf16 model (explicit upcasts, which an f32 export does not record), where ppc rounds
# each exported op (measured 8.8e-5 GPT-2, 1.8e-4 LLaMA apart; bf16 itself moves it
# 6e-5 from f32).
BF16_LIMIT = 2e-3
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]

# Small but not the defaults: odd sizes where a family allows, grouped-query heads,
# untied and tied heads, two layers so that merged parameters cross layers.
COMMON = dict(vocab_size=V, use_cache=False)


def _families():
    return {
        "gpt2": lambda: T.GPT2LMHeadModel(T.GPT2Config(
            n_positions=64, n_embd=48, n_layer=2, n_head=3, resid_pdrop=0, embd_pdrop=0,
            attn_pdrop=0, **COMMON)),
        "llama": lambda: T.LlamaForCausalLM(T.LlamaConfig(
            hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=6,
            num_key_value_heads=2, max_position_embeddings=64, **COMMON)),
        # Multi-query attention with an odd head count, over a longer sequence.
        "llama_mqa_t128": lambda: T.LlamaForCausalLM(T.LlamaConfig(
            hidden_size=40, intermediate_size=72, num_hidden_layers=1, num_attention_heads=5,
            num_key_value_heads=1, max_position_embeddings=256, **COMMON)),
        "mistral": lambda: T.MistralForCausalLM(T.MistralConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, sliding_window=8,
            tie_word_embeddings=True, **COMMON)),
        "gpt_neox": lambda: T.GPTNeoXForCausalLM(T.GPTNeoXConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=64, hidden_dropout=0, attention_dropout=0, **COMMON)),
        "bert": lambda: T.BertForMaskedLM(T.BertConfig(
            vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, max_position_embeddings=64, hidden_dropout_prob=0,
            attention_probs_dropout_prob=0)),
        "opt": lambda: T.OPTForCausalLM(T.OPTConfig(
            hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=64, word_embed_proj_dim=32, dropout=0,
            attention_dropout=0, **COMMON)),
        "bloom": lambda: T.BloomForCausalLM(T.BloomConfig(
            hidden_size=32, n_layer=2, n_head=4, hidden_dropout=0, attention_dropout=0,
            **COMMON)),
        "gptj": lambda: T.GPTJForCausalLM(T.GPTJConfig(
            n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64, resid_pdrop=0,
            embd_pdrop=0, attn_pdrop=0, **COMMON)),
        "albert": lambda: T.AlbertForMaskedLM(T.AlbertConfig(
            vocab_size=V, embedding_size=16, hidden_size=32, intermediate_size=64,
            num_hidden_layers=3, num_attention_heads=4, max_position_embeddings=64,
            hidden_dropout_prob=0, attention_probs_dropout_prob=0)),
        "roberta": lambda: T.RobertaForMaskedLM(T.RobertaConfig(
            vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, max_position_embeddings=64, hidden_dropout_prob=0,
            attention_probs_dropout_prob=0)),
        "phi": lambda: T.PhiForCausalLM(T.PhiConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=64, resid_pdrop=0, embd_pdrop=0, attention_dropout=0,
            **COMMON)),
        "falcon": lambda: T.FalconForCausalLM(T.FalconConfig(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=4, hidden_dropout=0,
            attention_dropout=0, **COMMON)),
        "mixtral": lambda: T.MixtralForCausalLM(T.MixtralConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, num_local_experts=4,
            num_experts_per_tok=2, **COMMON)),
    }


FAMILIES = _families()
# Extra graph inputs some exports carry: they are bound to their natural values.
WITH_MASK = {"bert", "opt", "roberta", "mixtral"}
# Meshes against mesh 1, as (column, mesh, flags); a subset keeps the suite under its
# time budget. At these sizes the planner replicates the weights (tensor parallelism
# does not pay for d = 32), so the tensor-parallel layouts are pinned with --shard:
# Megatron's column-parallel q, k, v and MLP inputs, row-parallel outputs.
def _megatron(prefix, layers, column, row):
    flags = []
    for i in range(layers):
        flags += [f for n in column for f in ("--shard", f"{prefix}.{i}.{n}.weight:0")]
        flags += [f for n in row for f in ("--shard", f"{prefix}.{i}.{n}.weight:1")]
    return flags


LLAMA_TP = _megatron("model.layers", 2, ("self_attn.q_proj", "self_attn.k_proj",
                                         "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"),
                     ("self_attn.o_proj", "mlp.down_proj"))
NEOX_TP = _megatron("gpt_neox.layers", 2, ("mlp.dense_h_to_4h",), ("mlp.dense_4h_to_h",))
MESHES = {
    "gpt2": [("2x2", "2x2", []), ("2x2x2", "2x2x2", []),
             ("pp+ZeRO", "2x1x2", ["--zero", "3"])],
    "llama": [("2x2", "2x2", []), ("2x2x2", "2x2x2", []),
              ("tp", "1x2", LLAMA_TP), ("tp+pp+ZeRO", "2x2x2", LLAMA_TP + ["--zero", "1"])],
    "llama_mqa_t128": [("2x2", "2x2", [])],
    "gpt_neox": [("tp", "2x2", NEOX_TP)],
    "bert": [("2x2", "2x2", [])],
    "opt": [("2x2x2", "2x2x2", [])],
    "bloom": [("2x2", "2x2", [])],
    "roberta": [("2x2", "2x2", [])],
    "albert": [("2x2", "2x2", []), ("2x2x2", "2x2x2", [])],
    "mixtral": [("2x2", "2x2", []), ("2x2x2", "2x2x2", [])],
}
# Compiled executables against simulate: (mesh, target). RoBERTa computes its
# position ids with a CumSum of the tokens at run time, and Mixtral's router a
# TopK: both run on both targets (CUDA on the emulator). GPT-2 too: on CUDA
# its attention reads the Conv1D projection's split heads in place and its
# gradient's kernel recomputes gelu_new's tanh (codegen/StridedViews.h,
# ppc-recompute pointwise).
EXECUTABLES = {"gpt2": [("2x2", "cpu"), ("1", "cuda-emulator")], "llama": [("1x2x2", "cpu")], "opt": [("2x2", "cpu")],
               "roberta": [("2x2", "cpu"), ("1", "cuda-emulator")],
               "mixtral": [("2x2", "cpu"), ("1", "cuda-emulator")]}


class CaseError(Exception):
    pass


def run(args, **kwargs):
    proc = subprocess.run(args, capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        raise CaseError(f"{' '.join(map(str, args[:3]))} ... exited {proc.returncode}: "
                        f"{(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
    return proc


def build(family):
    torch.manual_seed(0)
    model = FAMILIES[family]()
    model.eval()
    return model


SEQ_OF = {"llama_mqa_t128": 128}


def seq_of(family):
    return SEQ_OF.get(family, SEQ)


def example_inputs(family):
    ids = torch.zeros(BATCH, seq_of(family), dtype=torch.long)
    if family in WITH_MASK:
        return (ids, torch.ones_like(ids)), ["input_ids", "attention_mask"]
    return (ids,), ["input_ids"]


def export(model, family, path, how):
    args, names = example_inputs(family)
    if how == "helper":
        ppc_export.export(model, args, path, input_names=names, output_names=["logits"])
    else:
        torch.onnx.export(model, args, path, input_names=names, output_names=["logits"],
                          opset_version=17)


def batch_windows(tokens, step, seq):
    span = len(tokens) - seq - 1
    offsets = [((step * BATCH + b) * seq) % span for b in range(BATCH)]
    inputs = np.stack([tokens[o:o + seq] for o in offsets])
    labels = np.stack([tokens[o + 1:o + seq + 1] for o in offsets])
    return torch.from_numpy(inputs), torch.from_numpy(labels)


def torch_losses(model, tokens, seq=SEQ):
    """20 AdamW steps with ppc's defaults (lr 1e-3, weight decay 0.01), mean token
    cross-entropy on the logits, as ppc simulate trains."""
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    losses = []
    for step in range(STEPS):
        inputs, labels = batch_windows(tokens, step, seq)
        opt.zero_grad(set_to_none=True)
        logits = model(input_ids=inputs).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 labels.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(float(loss))
    model.eval()
    return losses


def read_log(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f]


def worst(actual, expected):
    if len(actual) != len(expected):
        raise CaseError(f"{len(actual)} steps logged, expected {len(expected)}")
    return max(abs(a - b) / abs(b) for a, b in zip(actual, expected))


def simulate(ppc, model, tmp, tag, mesh="1", extra=()):
    log = os.path.join(tmp, f"{tag}-{mesh}-{len(extra)}.jsonl")
    proc = run([ppc, "simulate", model, "--mesh", mesh, "--data", CORPUS, "--data-dtype",
                "u8", "--steps", str(STEPS), "--log", log, *extra])
    return read_log(log), [l for l in proc.stderr.splitlines() if l.startswith("warning:")]


def executable(ppc, model, tmp, tag, mesh, target):
    exe = os.path.join(tmp, f"{tag}-exe")
    log = exe + ".jsonl"
    run([ppc, "compile", model, "--mesh", mesh, "--target", target, "--data-dtype", "u8",
         "-o", exe])
    n = 1
    for m in mesh.split("x"):
        n *= int(m)
    run(MPIRUN + ["-np", str(n), exe, "--data", CORPUS, "--steps", str(STEPS), "--log", log,
                  "--threads-per-rank", "1"], timeout=600)
    return read_log(log)


def family_case(ppc, family, tokens, tmp):
    row = {"family": family}
    model = build(family)
    helper = os.path.join(tmp, f"{family}-helper.onnx")
    default = os.path.join(tmp, f"{family}-default.onnx")
    export(model, family, helper, "helper")
    export(model, family, default, "default")
    expected = torch_losses(model, tokens, seq_of(family))

    ppc_losses, warned = simulate(ppc, helper, tmp, f"{family}-helper")
    if warned:
        raise CaseError(f"the helper's export warned: {warned[0]}")
    row["torch"] = worst(ppc_losses, expected)
    row["meshes"] = {}
    for column, mesh, flags in MESHES.get(family, ()):
        losses = simulate(ppc, helper, tmp, f"{family}-helper", mesh, flags)[0]
        row["meshes"][column] = (mesh, worst(losses, ppc_losses))
    row["exe"] = []
    for mesh, target in EXECUTABLES.get(family, ()):
        losses = executable(ppc, helper, tmp, f"{family}-{target}", mesh, target)
        row["exe"].append((f"{mesh} {target}", worst(losses, ppc_losses)))

    try:
        default_losses, warned = simulate(ppc, default, tmp, f"{family}-default")
    except CaseError as e:
        # Refusing the file with an error that names the node is not silent.
        if "error: node '" not in str(e):
            raise
        row["default"] = None
        row["refused"] = str(e).split("error: ", 1)[1][:150]
        return row
    row["default"] = worst(default_losses, expected)
    row["warnings"] = warned
    if row["default"] > TORCH_LIMIT and not warned:
        raise CaseError(f"torch's default export trains differently "
                        f"({row['default']:.2e}) and ppc said nothing")
    if warned:
        untied, _ = simulate(ppc, default, tmp, f"{family}-untied", extra=["--untie"])
        row["untied"] = worst(untied, expected)
    return row


def helper_checks(ppc, tokens, tmp):
    """What the export helper records and refuses: GPT-2's tie, a frozen parameter
    (trained by neither side), a dropout above 0."""
    model = build("gpt2")
    model.transformer.wpe.weight.requires_grad_(False)
    path = os.path.join(tmp, "gpt2-frozen.onnx")
    record = ppc_export.export(model, example_inputs("gpt2")[0], path,
                               input_names=["input_ids"], output_names=["logits"])
    tied = record["tied"].get("transformer.wte.weight")
    if tied != ["transformer.wte.weight", "lm_head.weight"]:
        raise CaseError(f"GPT-2's tie is recorded as {record['tied']}")
    if record["frozen"] != ["transformer.wpe.weight"]:
        raise CaseError(f"frozen: {record['frozen']}, expected the position table")
    losses, warned = simulate(ppc, path, tmp, "gpt2-frozen")
    err = worst(losses, torch_losses(model, tokens))
    if err > TORCH_LIMIT or warned:
        raise CaseError(f"frozen position table: {err:.2e} against torch, warnings {warned}")
    print(f"helper: GPT-2 tie recorded {tied}; frozen {record['frozen']} trains as in "
          f"torch: {err:.2e}")

    torch.manual_seed(0)
    dropout = T.GPT2LMHeadModel(T.GPT2Config(n_positions=64, n_embd=48, n_layer=1, n_head=3,
                                             **COMMON))
    try:
        ppc_export.export(dropout, example_inputs("gpt2")[0],
                          os.path.join(tmp, "dropout.onnx"), input_names=["input_ids"])
    except ppc_export.ExportError as e:
        print(f"helper: refused: {str(e)[:150]}")
    else:
        raise CaseError("the helper exported a model with dropout 0.1 for training")


def precision_checks(ppc, tokens, tmp):
    """bf16 and fp16 on GPT-2 and LLaMA as Hugging Face builds and exports them."""
    for family in ("gpt2", "llama"):
        model = build(family)
        path = os.path.join(tmp, f"{family}-precision.onnx")
        export(model, family, path, "helper")
        inputs, labels = batch_windows(tokens, 0, SEQ)
        low = copy.deepcopy(model).to(torch.bfloat16)
        with torch.no_grad():
            logits = low(input_ids=inputs).logits.float()
        first = float(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                        labels.reshape(-1)))
        f32 = torch_losses(copy.deepcopy(model), tokens)
        bf16, _ = simulate(ppc, path, tmp, f"{family}-bf16", extra=["--precision", "bf16"])
        first_err = abs(bf16[0] - first) / first
        err = worst(bf16, f32)
        fp16_log = os.path.join(tmp, f"{family}-fp16.jsonl")
        run([ppc, "simulate", path, "--data", CORPUS, "--data-dtype", "u8", "--steps",
             str(STEPS), "--log", fp16_log, "--precision", "fp16"])
        records = [json.loads(line) for line in open(fp16_log)]
        skipped = sum(bool(r["overflow"]) for r in records)
        finite = all(r["loss"] is not None and math.isfinite(r["loss"]) for r in records)
        print(f"precision: {family}: bf16 first loss {first_err:.1e} from torch's bf16 model, "
              f"20 steps {err:.1e} from f32; fp16 skipped {skipped} steps, loss "
              f"{records[0]['loss']:.4f} -> {records[-1]['loss']:.4f}")
        if err > BF16_LIMIT or not finite or skipped == STEPS:
            raise CaseError(f"{family}: bf16 {first_err:.2e} / {err:.2e}, fp16 finite "
                            f"{finite}, skipped {skipped}")


def format_row(row):
    meshes = row.get("meshes", {})

    def mesh_cell(column):
        return f"{meshes[column][1]:.2e}" if column in meshes else "-"
    exe_text = ", ".join(f"{err:.2e} ({where})" for where, err in row.get("exe", ())) or "-"
    if row["default"] is None:
        default = "refused: " + row["refused"][:60]
    else:
        default = f"{row['default']:.2e}"
    if row.get("warnings"):
        default += f", warned x{len(row['warnings'])}"
        if "untied" in row:
            default += f"; --untie {row['untied']:.2e}"
    elif row["default"] is not None:
        default += ", no warning"
    others = [f"{c} {m}: {e:.2e}" for c, (m, e) in meshes.items() if c not in ("2x2", "2x2x2")]
    return (f"{row['family']:<14} {'yes':<7} {row['torch']:>9.2e} {mesh_cell('2x2'):>9} "
            f"{mesh_cell('2x2x2'):>9}  {exe_text:<28} {default}" +
            (f"\n{'':<14} layouts: {'; '.join(others)}" if others else ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ppc", required=True)
    parser.add_argument("--only", default="", help="comma-separated families")
    parser.add_argument("--keep", help="keep the exports and logs in this directory")
    args = parser.parse_args()
    families = args.only.split(",") if args.only else list(FAMILIES)
    torch.set_num_threads(1)
    tokens = np.fromfile(CORPUS, dtype=np.uint8).astype(np.int64)
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        return check_all(args, families, tokens, args.keep)
    # Each run writes some 30 MB of exports: removed with the directory.
    with tempfile.TemporaryDirectory(prefix="ppc-hf-") as tmp:
        return check_all(args, families, tokens, tmp)


def check_all(args, families, tokens, tmp):
    """The checks and families into `tmp`; the exit status."""
    print(f"{'family':<14} {'imports':<7} {'vs torch':>9} {'2x2':>9} {'2x2x2':>9}  "
          f"{'executable vs simulate':<28} torch's default export vs torch")
    failures = []
    if not args.only:
        try:
            helper_checks(args.ppc, tokens, tmp)
        except CaseError as e:
            failures.append("helper")
            print(f"helper: FAIL: {e}")
        try:
            precision_checks(args.ppc, tokens, tmp)
        except CaseError as e:
            failures.append("precision")
            print(f"precision: FAIL: {e}")
    for family in families:
        try:
            row = family_case(args.ppc, family, tokens, tmp)
        except CaseError as e:
            failures.append(family)
            print(f"{family:<14} FAIL: {e}", flush=True)
            continue
        limits = [row["torch"] <= TORCH_LIMIT]
        limits += [err <= MESH_LIMIT for _, err in row["meshes"].values()]
        limits += [err <= MESH_LIMIT for _, err in row.get("exe", ())]
        if "untied" in row:
            limits.append(row["untied"] <= TORCH_LIMIT or any(
                "transpose of the embedding" in w for w in row["warnings"]))
        print(format_row(row) + ("" if all(limits) else "   OVER THE LIMIT"), flush=True)
        for w in row.get("warnings", ()):
            print(f"{'':<14} {w[:160]}")
        if not all(limits):
            failures.append(family)
    if failures:
        print(f"failed: {', '.join(failures)}")
        return 1
    print(f"all {len(families)} families within limits (torch {TORCH_LIMIT}, meshes and "
          f"executables {MESH_LIMIT})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
