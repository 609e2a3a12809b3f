#!/usr/bin/python3
"""Small reference transformers for ppc, and their ONNX exporter.

Kinds (all return logits [B, T, V] from int64 ``input_ids`` [B, T], except gpt-loss):

* ``gpt``      GPT-2 style: token + learned position embedding, pre-LayerNorm blocks,
               causal attention with a fused, biased QKV projection, GELU (erf) MLP,
               final LayerNorm, LM head tied to the token embedding.
* ``llama``    LLaMA style: RMSNorm, rotary position embedding (tables built in
               ``forward`` from ``torch.arange``), causal attention with separate q/k/v
               projections, SwiGLU MLP, no biases anywhere, untied LM head.
* ``bert``     BERT style encoder: token + position embedding, embedding LayerNorm,
               post-LayerNorm blocks, bidirectional attention, GELU MLP, LM head tied
               to the token embedding with an output bias.
* ``gpt-loss`` the ``gpt`` model (same weights for the same seed) whose forward is
               ``forward(input_ids, labels)`` and returns the mean token cross-entropy.

Weights are drawn from ``seed`` only: linear/embedding weights and every bias are
``0.02 * randn``; LayerNorm/RMSNorm weights are ``1 + 0.1 * randn`` so that bugs in the
norm paths change results. There is no dropout. LayerNorm eps is 1e-5, RMSNorm eps 1e-6,
rotary base 10000. The FFN width defaults to ``4 * d_model``, and for llama to
``8/3 * d_model`` rounded up to a multiple of 8 (d_model 64 -> 176).

Library use::

    from ppc_models import DEFAULT_CFG, build_model, example_inputs, export
    export("gpt", dict(DEFAULT_CFG), "gpt.onnx")

Command line: ``/usr/bin/python3 models/ppc_models.py --help``.
"""
import argparse
import math
import os
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

KINDS = ("gpt", "llama", "bert", "neox", "gpt-loss")
DEFAULT_CFG = dict(vocab=256, d_model=64, n_layers=2, n_heads=4, seq=16, batch=2,
                   ffn=None, seed=0)


def _cfg(kind, cfg):
    """Return a complete config: defaults filled in, ``ffn`` resolved, shapes checked."""
    unknown = set(cfg) - set(DEFAULT_CFG)
    if unknown:
        raise ValueError(f"unknown config keys: {', '.join(sorted(unknown))}")
    c = dict(DEFAULT_CFG, **cfg)
    if c["ffn"] is None:
        d = c["d_model"]
        c["ffn"] = 8 * math.ceil(8 * d / 3 / 8) if kind == "llama" else 4 * d
    if c["d_model"] % c["n_heads"]:
        raise ValueError("d_model must be a multiple of n_heads")
    if kind == "llama" and (c["d_model"] // c["n_heads"]) % 2:
        raise ValueError("llama needs an even head dimension for rotary embedding")
    if kind == "neox" and (c["d_model"] // c["n_heads"]) % 8:
        raise ValueError("neox needs a head dimension divisible by 8 (a quarter rotated)")
    return c


def split_heads(x, n_heads):
    """[B, T, D] -> [B, H, T, D/H]."""
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)


def merge_heads(x):
    """[B, H, T, hd] -> [B, T, H*hd]."""
    b, h, t, hd = x.shape
    return x.transpose(1, 2).reshape(b, t, h * hd)


def attention(q, k, v, causal):
    """Scaled dot-product attention on [B, H, T, hd] (attention_ops; a test's
    reference may replace this to run it as one fused op)."""
    return attention_ops(q, k, v, causal)


def attention_ops(q, k, v, causal):
    """Scaled dot-product attention on [B, H, T, hd], written out op by op.

    The causal mask is a boolean lower triangle built here from the sequence length, so
    the exporter emits ConstantOfShape + Trilu (opset >= 14) unless it folds them.
    """
    return torch.softmax(attention_scores(q, k, causal), dim=-1) @ v


def attention_scores(q, k, causal):
    """q k^T / sqrt(hd), the causal mask applied with -inf (attention_ops')."""
    t = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        keep = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    return scores


class FusedAttention(nn.Module):
    """Multi-head self-attention with one biased QKV linear whose output is split."""

    def __init__(self, d, n_heads, causal):
        super().__init__()
        self.n_heads, self.causal = n_heads, causal
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        q, k, v = self.qkv(x).split(x.shape[-1], dim=2)
        q, k, v = (split_heads(y, self.n_heads) for y in (q, k, v))
        return self.proj(merge_heads(attention(q, k, v, self.causal)))


def mlp(d, ffn):
    """Linear -> exact (erf) GELU -> Linear, with biases."""
    return nn.Sequential(nn.Linear(d, ffn), nn.GELU(), nn.Linear(ffn, d))


class GPTBlock(nn.Module):
    """Pre-LN block: x += attn(ln1(x)); x += mlp(ln2(x))."""

    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = FusedAttention(d, c["n_heads"], causal=True)
        self.mlp = mlp(d, c["ffn"])

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """GPT-2 style decoder; ``forward(input_ids) -> logits [B, T, V]``."""

    def __init__(self, c):
        super().__init__()
        self.wte = nn.Embedding(c["vocab"], c["d_model"])
        self.wpe = nn.Embedding(c["seq"], c["d_model"])
        self.blocks = nn.ModuleList(GPTBlock(c) for _ in range(c["n_layers"]))
        self.ln_f = nn.LayerNorm(c["d_model"])
        self.lm_head = nn.Linear(c["d_model"], c["vocab"], bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, input_ids):
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class GPTLoss(GPT):
    """GPT whose forward returns the scalar mean cross-entropy against ``labels``."""

    def forward(self, input_ids, labels):
        logits = super().forward(input_ids)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1))


class RMSNorm(nn.Module):
    """x * rsqrt(mean(x^2) + eps) * weight over the last dimension."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary_tables(t, hd, device, dtype=torch.float32, base=10000.0):
    """cos and sin tables [T, hd] of rotary embedding, computed from torch.arange in
    ``dtype`` (the model's, so a float64 model has float64 tables)."""
    inv_freq = 1.0 / base ** (torch.arange(0, hd, 2, dtype=dtype, device=device) / hd)
    angles = torch.arange(t, dtype=dtype, device=device)[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def apply_rotary(x, cos, sin):
    """Rotate [B, H, T, hd] by the tables (rotate-half convention, as in HF LLaMA)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class LlamaAttention(nn.Module):
    """Causal self-attention with separate bias-free q/k/v/o projections and RoPE."""

    def __init__(self, d, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d, d, bias=False) for _ in range(4))

    def forward(self, x):
        q, k, v = (split_heads(w(x), self.n_heads) for w in (self.wq, self.wk, self.wv))
        # The tables in f32 (f64 for an f64 model) and cast to the activations'
        # type, as HF LLaMA computes them: a bf16 model's angles in bf16 would be
        # whole radians off at position 1000.
        table_type = torch.float64 if x.dtype == torch.float64 else torch.float32
        cos, sin = (t.to(x.dtype) for t in
                    rotary_tables(q.shape[-2], q.shape[-1], x.device, table_type))
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        return self.wo(merge_heads(attention(q, k, v, causal=True)))


class LlamaBlock(nn.Module):
    """Pre-RMSNorm block with SwiGLU MLP: w2(silu(w1 x) * w3 x)."""

    def __init__(self, c):
        super().__init__()
        d, f = c["d_model"], c["ffn"]
        self.attn_norm, self.mlp_norm = RMSNorm(d), RMSNorm(d)
        self.attn = LlamaAttention(d, c["n_heads"])
        self.w1, self.w3 = nn.Linear(d, f, bias=False), nn.Linear(d, f, bias=False)
        self.w2 = nn.Linear(f, d, bias=False)

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        h = self.mlp_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    """LLaMA style decoder; ``forward(input_ids) -> logits [B, T, V]``."""

    def __init__(self, c):
        super().__init__()
        self.tok = nn.Embedding(c["vocab"], c["d_model"])
        self.blocks = nn.ModuleList(LlamaBlock(c) for _ in range(c["n_layers"]))
        self.norm = RMSNorm(c["d_model"])
        self.lm_head = nn.Linear(c["d_model"], c["vocab"], bias=False)

    def forward(self, input_ids):
        x = self.tok(input_ids)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.norm(x))


class NeoXAttention(nn.Module):
    """GPT-NeoX's causal self-attention: one biased QKV linear, rotary embedding on the
    first quarter of each head's dimensions (``rotary_pct`` 0.25), the rest passed."""

    def __init__(self, d, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d, 3 * d)
        self.dense = nn.Linear(d, d)

    def forward(self, x):
        q, k, v = (split_heads(y, self.n_heads) for y in self.qkv(x).split(x.shape[-1], dim=2))
        rot = q.shape[-1] // 4
        cos, sin = rotary_tables(q.shape[-2], rot, x.device)
        q, k = (torch.cat([apply_rotary(y[..., :rot], cos, sin), y[..., rot:]], dim=-1)
                for y in (q, k))
        return self.dense(merge_heads(attention(q, k, v, causal=True)))


class NeoXBlock(nn.Module):
    """GPT-NeoX's parallel residual: x + attn(ln1(x)) + mlp(ln2(x)), tanh GELU."""

    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = NeoXAttention(d, c["n_heads"])
        self.mlp = nn.Sequential(nn.Linear(d, c["ffn"]), nn.GELU(approximate="tanh"),
                                 nn.Linear(c["ffn"], d))

    def forward(self, x):
        return x + self.attn(self.ln1(x)) + self.mlp(self.ln2(x))


class NeoX(nn.Module):
    """GPT-NeoX style decoder (untied head, no position table); ``forward(input_ids)
    -> logits [B, T, V]``."""

    def __init__(self, c):
        super().__init__()
        self.embed = nn.Embedding(c["vocab"], c["d_model"])
        self.blocks = nn.ModuleList(NeoXBlock(c) for _ in range(c["n_layers"]))
        self.ln_f = nn.LayerNorm(c["d_model"])
        self.lm_head = nn.Linear(c["d_model"], c["vocab"], bias=False)

    def forward(self, input_ids):
        x = self.embed(input_ids)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class BertBlock(nn.Module):
    """Post-LN block: x = ln1(x + attn(x)); x = ln2(x + mlp(x))."""

    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.attn = FusedAttention(d, c["n_heads"], causal=False)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.mlp = mlp(d, c["ffn"])

    def forward(self, x):
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.mlp(x))


class Bert(nn.Module):
    """BERT style encoder with a tied, biased LM head; ``forward(input_ids) -> logits``."""

    def __init__(self, c):
        super().__init__()
        self.wte = nn.Embedding(c["vocab"], c["d_model"])
        self.wpe = nn.Embedding(c["seq"], c["d_model"])
        self.ln_emb = nn.LayerNorm(c["d_model"])
        self.blocks = nn.ModuleList(BertBlock(c) for _ in range(c["n_layers"]))
        self.lm_head = nn.Linear(c["d_model"], c["vocab"])
        self.lm_head.weight = self.wte.weight

    def forward(self, input_ids):
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.ln_emb(self.wte(input_ids) + self.wpe(pos))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(x)


_CLASSES = {"gpt": GPT, "llama": Llama, "bert": Bert, "neox": NeoX, "gpt-loss": GPTLoss}


def build_model(kind, cfg):
    """Build ``kind`` from ``cfg`` (missing keys from DEFAULT_CFG), seeded, in eval mode.

    Parameters are visited in ``named_parameters`` order (tied weights once) and drawn
    from a generator seeded with ``cfg["seed"]``; so ``gpt`` and ``gpt-loss`` agree.
    """
    if kind not in _CLASSES:
        raise ValueError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
    c = _cfg(kind, cfg)
    model = _CLASSES[kind](c)
    gen = torch.Generator().manual_seed(c["seed"])
    norm_weights = {id(m.weight) for m in model.modules()
                    if isinstance(m, (nn.LayerNorm, RMSNorm))}
    with torch.no_grad():
        for p in model.parameters():
            noise = torch.randn(p.shape, generator=gen)
            p.copy_(1 + 0.1 * noise if id(p) in norm_weights else 0.02 * noise)
    return model.eval()


def input_names(kind):
    """ONNX graph input names of ``kind``."""
    return ["input_ids", "labels"] if kind == "gpt-loss" else ["input_ids"]


def output_name(kind):
    """ONNX graph output name of ``kind``."""
    return "loss" if kind == "gpt-loss" else "logits"


def example_inputs(kind, cfg, seed=None):
    """Random int64 [batch, seq] tensors in [0, vocab), one per graph input.

    ``seed`` defaults to ``cfg["seed"] + 1``; the global torch RNG is not touched.
    """
    c = _cfg(kind, cfg)
    gen = torch.Generator().manual_seed(c["seed"] + 1 if seed is None else seed)
    return tuple(torch.randint(0, c["vocab"], (c["batch"], c["seq"]), generator=gen)
                 for _ in input_names(kind))


def dynamic_axes(kind):
    """``dynamic_axes`` for torch.onnx.export: dim 0 of every input ``batch``, dim 1
    ``seq``, and the same dims of the logits output (gpt-loss's loss is a scalar)."""
    axes = {name: {0: "batch", 1: "seq"} for name in input_names(kind)}
    if kind != "gpt-loss":
        axes[output_name(kind)] = {0: "batch", 1: "seq"}
    return axes


def export(kind, cfg, path, opset=17, constant_folding=True, dtype=torch.float32,
           dynamic=False):
    """Export ``kind`` to ``path``, its parameters in ``dtype``; returns (model, example
    inputs). Shapes are static unless ``dynamic``: then every input's dim 0 is the
    symbolic ``batch`` and dim 1 ``seq`` (and the logits' matching dims), which ppc binds
    with ``--dim batch=N --dim seq=T``. A bound ``seq`` must not exceed ``cfg["seq"]`` for
    gpt and bert (the position table has that many rows)."""
    model, inputs = build_model(kind, cfg).to(dtype), example_inputs(kind, cfg)
    with torch.no_grad(), warnings.catch_warnings():
        # Shapes are static by design, so the tracer's "treated as a constant" is intended.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        torch.onnx.export(model, inputs, path, export_params=True, opset_version=opset,
                          do_constant_folding=constant_folding,
                          training=torch.onnx.TrainingMode.EVAL,
                          input_names=input_names(kind), output_names=[output_name(kind)],
                          dynamic_axes=dynamic_axes(kind) if dynamic else None)
    return model, inputs


def main(argv=None):
    """Command line: export one model, optionally with its example inputs and outputs."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--kind", required=True, choices=KINDS, help="model family")
    p.add_argument("--out", required=True, help="ONNX file to write")
    p.add_argument("--opset", type=int, default=17, help="ONNX opset version")
    p.add_argument("--no-constant-folding", action="store_true",
                   help="keep Transpose(weight) and other constant subexpressions as ops; "
                        "this keeps parameter names and tied weights (see README)")
    for flag, key, what in (("--vocab", "vocab", "vocabulary size"),
                            ("--d-model", "d_model", "hidden size"),
                            ("--layers", "n_layers", "number of blocks"),
                            ("--heads", "n_heads", "attention heads"),
                            ("--seq", "seq", "sequence length T"),
                            ("--batch", "batch", "batch size B"),
                            ("--seed", "seed", "weight seed (inputs use seed+1)")):
        p.add_argument(flag, dest=key, type=int, default=DEFAULT_CFG[key], help=what)
    p.add_argument("--ffn", type=int, default=None,
                   help="MLP width; None: 4*d_model, llama 8/3*d_model rounded up to 8")
    p.add_argument("--dynamic", action="store_true",
                   help="symbolic dims: dim 0 of every input (and of the logits) is "
                        "'batch', dim 1 'seq' (bind them with ppc's --dim batch=N "
                        "--dim seq=T)")
    p.add_argument("--save-inputs", metavar="DIR",
                   help="write the example inputs as DIR/<input name>.npy (int64)")
    p.add_argument("--save-logits", metavar="FILE",
                   help="write torch's output for the example inputs (the scalar loss "
                        "for gpt-loss) as a float32 .npy")
    a = p.parse_args(argv)
    cfg = {k: getattr(a, k) for k in DEFAULT_CFG}
    model, inputs = export(a.kind, cfg, a.out, a.opset, not a.no_constant_folding,
                           dynamic=a.dynamic)
    if a.save_inputs:
        os.makedirs(a.save_inputs, exist_ok=True)
        for name, x in zip(input_names(a.kind), inputs):
            np.save(os.path.join(a.save_inputs, name + ".npy"), x.numpy())
    if a.save_logits:
        with torch.no_grad():
            np.save(a.save_logits, model(*inputs).numpy())


if __name__ == "__main__":
    main()
