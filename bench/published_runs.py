"""Validation: ppc plan's predicted throughput for published large training runs, with
their models, clusters and layouts pinned, against the published figure; and what
ppc plan chooses for the same model, devices, batch and cluster when nothing is pinned.

    /usr/bin/python3 bench/published_runs.py --ppc build/bin/ppc [--runs gpt3-175b,...]
        [--models DIR] [--json F.json]

The models are written torch-free with sparse weights (models/onnx_gpt.py for
Megatron's GPT, models/onnx_llama.py for Llama 3): only their shapes matter. The
published figures and their sources (docs/performance.md cites them):

- Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
  Using Megatron-LM" (arXiv 2104.04473), Table 1 (A100 80 GB, Selene): 145.6B on 1536
  GPUs (tp 8, pp 8, batch 2304): 148 TFLOP/s per GPU; 529.6B on 2520 (tp 8, pp 35, batch
  2520): 163. Their TFLOP/s count the recomputed forward (full activation recomputation):
  F = 96 B s l h^2 (1 + s / 6h + V / 16 l h) per step. The interleaved schedule; the
  micro-batch size and the chunks per rank are not given (1 and 2 here).
- The same paper: GPT-3 175B on 1024 GPUs, batch 1536, 140 TFLOP/s per GPU; the layout
  of NVIDIA's examples/pretrain_gpt3_175B.sh (tp 8, pp 16, micro-batch 1, recomputation),
  which the paper does not say it ran.
- Smith et al. 2022, "Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B"
  (arXiv 2201.11990): 105 layers, h 20480, 128 heads, tp 8, pp 35, 280 DGX A100 nodes
  (dp 8), batch 1920, bf16: 126 TFLOP/s per GPU (60.1 s per step; F as above).
- Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
  Models" (arXiv 2205.05198), abstract: the 530B GPT on 2240 A100s at 54.2% MFU with
  sequence parallelism and selective recomputation, "29% faster than the 42.1% we
  achieve using recomputation". Their layout is taken as MT-NLG's (tp 8, pp 35, dp 8;
  batch 1920: assumed); MFU's FLOPs are the model's, 72 B s l h^2 (1 + s / 6h + V / 12 l h).
- "The Llama 3 Herd of Models" (arXiv 2407.21783), Table 4: 405B (126 layers, d 16384,
  FFN 53248, 128 heads, 8 KV heads, vocab 128256), sequence 8192, 16M tokens per step,
  tp 8, pp 16, no recomputation, FSDP sharding the optimizer state and gradients without
  resharding the parameters after the forward, the interleaved schedule (v not given:
  2 here). Their gradients are reduced once a step, which is ppc's ZeRO 1 traffic (ppc's
  ZeRO 2 reduce-scatters every micro-batch's gradient, as DeepSpeed's stage 2), so the
  layout is priced with ZeRO 1: 8192 GPUs (dp 64): 430 TFLOP/s per GPU, 43% MFU; 16384 (dp 128):
  400, 41% MFU (of 989 dense bf16). Their FLOPs are the model's (no recomputation):
  6 N + 6 l d s per token (causal attention) is used here to turn them into a step time.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "models")

GPT = dict(gen="onnx_gpt.py", vocab=51200, seq=2048)
# Megatron-LM's 2021 runs and MT-NLG materialised the attention scores (fused softmax
# kernels, no FlashAttention): ppc's --attention unfused; Llama 3 did not.
# Llama 3 405B's runs of Table 4: the same model, cluster, batch and knobs.
LLAMA3 = dict(model=dict(gen="onnx_llama.py", layers=126, hidden=16384, heads=128, kv_heads=8,
                         intermediate=53248, vocab=128256, seq=8192),
              cluster="dgx-h100", batch=2048, schedule="interleaved", v=2, zero=1,
              recompute="none", flops="model", attention="fused")
RUNS = {
    "megatron-145b": dict(model=dict(GPT, layers=80, hidden=12288, heads=96), cluster="dgx-a100",
                          mesh="24x8x8", batch=2304, micro=96, schedule="interleaved", v=2,
                          zero=0, recompute="full", published=148e12, flops="megatron",
                          attention="unfused", source="Narayanan et al. 2021, Table 1"),
    "gpt3-175b": dict(model=dict(GPT, layers=96, hidden=12288, heads=96), cluster="dgx-a100",
                      mesh="8x8x16", batch=1536, micro=192, schedule="1f1b", v=1, zero=0,
                      recompute="full", published=140e12, flops="megatron",
                      attention="unfused", source="Narayanan et al. 2021, section 5 (pretrain_gpt3_175B.sh layout)"),
    "megatron-530b": dict(model=dict(GPT, layers=105, hidden=20480, heads=128),
                          cluster="dgx-a100", mesh="9x8x35", batch=2520, micro=280,
                          schedule="interleaved", v=3, zero=0, recompute="full",
                          published=163e12, flops="megatron",
                          attention="unfused", source="Narayanan et al. 2021, Table 1"),
    "mt-nlg-530b": dict(model=dict(GPT, layers=105, hidden=20480, heads=128), cluster="dgx-a100",
                        mesh="8x8x35", batch=1920, micro=240, schedule="1f1b", v=1, zero=1,
                        recompute="full", published=126e12, flops="megatron",
                        attention="unfused", source="Smith et al. 2022 (280 nodes)"),
    "korthikanti-530b": dict(model=dict(GPT, layers=105, hidden=20480, heads=128),
                             cluster="dgx-a100", mesh="8x8x35", batch=1920, micro=240,
                             schedule="1f1b", v=1, zero=0, recompute="selective", sp=True,
                             published=0.542 * 312e12, flops="megatron-model",
                             attention="unfused",
                             source="Korthikanti et al. 2022, abstract (54.2% MFU)"),
    "llama3-405b-8k": dict(LLAMA3, mesh="64x8x16", micro=32, published=430e12,
                           source="Llama 3 Herd of Models, Table 4 (8192 GPUs)"),
    "llama3-405b-16k": dict(LLAMA3, mesh="128x8x16", micro=16, published=400e12,
                            source="Llama 3 Herd of Models, Table 4 (16384 GPUs)"),
}


def model_path(root, m):
    name = "-".join(f"{k}{v}" for k, v in sorted(m.items()) if k != "gen")
    path = os.path.join(root, name, "model.onnx")
    if not os.path.exists(path):
        cmd = [sys.executable, os.path.join(MODELS, m["gen"]), "--layers", str(m["layers"]),
               "--hidden", str(m["hidden"]), "--heads", str(m["heads"]), "--vocab",
               str(m["vocab"]), "--seq", str(m["seq"]), "--batch", "0", "-o", path]
        if m["gen"] == "onnx_llama.py":
            cmd += ["--kv-heads", str(m["kv_heads"]), "--intermediate", str(m["intermediate"])]
        subprocess.run(cmd, check=True)
    return path


def step_flops(run):
    """The step's FLOPs as the source counts them."""
    m, b = run["model"], run["batch"]
    s, l, h, v = m["seq"], m["layers"], m["hidden"], m["vocab"]
    if run["flops"] == "megatron":
        return 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))
    if run["flops"] == "megatron-model":  # the same without the recomputed forward
        return 72 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h))
    kv = m["kv_heads"] * h // m["heads"]
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * m["intermediate"]
    params = l * per_layer + 2 * v * h
    return b * s * (6 * params + 6 * l * h * s)


def plan(ppc, path, run, pinned, top=1, attention=None, memory=None):
    m = run["model"]
    cmd = [ppc, "plan", path, "--seq", str(m["seq"]), "--global-batch", str(run["batch"]),
           "--cluster", run["cluster"], "--precision", "bf16", "--top", str(top),
           "--attention", attention or run["attention"]]
    if memory:
        cmd += ["--memory-per-rank", memory]
    dp, tp, pp = (int(x) for x in run["mesh"].split("x"))
    if pinned:
        cmd += ["--mesh", run["mesh"], "--zero", str(run["zero"]), "--recompute",
                run["recompute"], "--micro-batches", str(run["micro"]), "--offload", "none",
                "--schedule", run["schedule"]]
        if run["v"] > 1:
            cmd += ["--virtual-stages", str(run["v"])]
        if run.get("sp"):
            cmd += ["--sequence-parallel"]
    else:
        cmd += ["--devices", str(dp * tp * pp)]
    out_json = path + (".pinned.json" if pinned else ".search.json")
    start = time.perf_counter()
    done = subprocess.run(cmd + ["--json", out_json], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        error = done.stderr.strip().splitlines()[-1]
        if pinned and not memory and "fits" in error:
            # Priced anyway, without the budget: how fast, and how far over.
            result = plan(ppc, path, run, pinned, top, attention, memory="1e15")
            result["fits"] = False
            return result
        return dict(error=error, seconds=seconds)
    return dict(plans=json.load(open(out_json))["plans"], seconds=seconds, table=done.stdout,
                fits=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ppc", required=True)
    p.add_argument("--runs", default=",".join(RUNS))
    p.add_argument("--models", default="/tmp/ppc-published-models",
                   help="where the sparse models are written (kept between runs)")
    p.add_argument("--no-search", action="store_true", help="price the published layouts only")
    p.add_argument("--attention", choices=("fused", "unfused"),
                   help="price every run with this attention instead of its own")
    p.add_argument("--json")
    args = p.parse_args()
    results = {}
    for name in args.runs.split(","):
        run = dict(RUNS[name])
        if args.attention:
            run["attention"] = args.attention
        path = model_path(args.models, run["model"])
        dp, tp, pp = (int(x) for x in run["mesh"].split("x"))
        n = dp * tp * pp
        flops = step_flops(run)
        published_step = flops / (run["published"] * n)
        pinned = plan(args.ppc, path, run, True)
        row = dict(run=name, source=run["source"], devices=n, published_tflops=run["published"] / 1e12,
                   published_step=published_step)
        if "error" in pinned:
            print(f"{name}: the published layout: {pinned['error']}", flush=True)
            row["pinned_error"] = pinned["error"]
        else:
            c = pinned["plans"][0]
            row.update(predicted_step=c["step_seconds"],
                       predicted_tflops=flops / (c["step_seconds"] * n) / 1e12,
                       predicted_peak=c["peak_bytes"], bubble=c["bubble_seconds"] / c["step_seconds"],
                       comm=c["comm_seconds"] / c["step_seconds"], seconds=pinned["seconds"],
                       outside=c["outside_search"], fits=pinned["fits"])
            print(f"{name} ({run['source']}): {run['mesh']} on {n} x {run['cluster']}, batch "
                  f"{run['batch']}: published {run['published'] / 1e12:.0f} TFLOP/s per GPU "
                  f"({published_step:.2f} s per step); predicted {row['predicted_tflops']:.0f} "
                  f"({c['step_seconds']:.2f} s, {100 * (c['step_seconds'] / published_step - 1):+.0f}%"
                  f" step time; bubble {100 * row['bubble']:.0f}%, comm {100 * row['comm']:.0f}%, "
                  f"peak {c['peak_bytes'] / 2**30:.1f} GiB"
                  f"{'' if pinned['fits'] else ' (over the device memory in ppc model)'}; "
                  f"{run['attention']} attention; priced in {pinned['seconds']:.0f} s)",
                  flush=True)
        attentions = [] if args.no_search else [run["attention"]]
        if run["attention"] == "unfused" and not args.no_search:
            attentions.append("fused")
        for attention in attentions:
            found = plan(args.ppc, path, run, False, top=3, attention=attention)
            if "error" in found:
                print(f"  search ({attention} attention): {found['error']}", flush=True)
                row["search_error_" + attention] = found["error"]
                continue
            best = found["plans"][0]
            row["search_" + attention] = dict(
                plan=dict((k, best[k]) for k in (
                    "dp", "tp", "pp", "zero", "sequence_parallel", "micro_batches", "schedule",
                    "virtual_stages", "recompute", "offload", "step_seconds", "peak_bytes")),
                speedup=(row.get("predicted_step") or best["step_seconds"]) / best["step_seconds"],
                seconds=found["seconds"])
            print(f"  ppc plan's choice, {attention} attention ({found['seconds']:.0f} s): "
                  f"{best['dp']}x{best['tp']}x{best['pp']} ZeRO {best['zero']}"
                  f"{' SP' if best['sequence_parallel'] else ''} {best['micro_batches']} "
                  f"micro-batches {best['schedule'] or '-'} recompute {best['recompute']}: "
                  f"{best['step_seconds']:.2f} s per step, "
                  f"{row['search_' + attention]['speedup']:.2f}x the published layout's "
                  f"predicted, peak {best['peak_bytes'] / 2**30:.1f} GiB", flush=True)
        results[name] = row
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
