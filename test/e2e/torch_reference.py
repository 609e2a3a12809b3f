#!/usr/bin/python3
"""PyTorch reference trainer for ppc's training contract (DESIGN.md section 4).

It trains one of the ``models/ppc_models.py`` transformers on CPU, starting from the
initializers of an ONNX export, on the same data windows, loss and optimizer as
``ppc simulate`` / a compiled ppc trainer, and writes the same JSON-lines log:

    /usr/bin/python3 test/e2e/torch_reference.py MODEL.onnx --data FILE \\
        [--data-dtype u8|u16|i32] --steps N [--log F.jsonl] [--kind K] \\
        [--batch B] [--seq T] [--micro-batches M] \\
        [--optimizer sgd|adamw] [--lr 1e-3] [--momentum 0] [--betas 0.9,0.999] \\
        [--eps 1e-8] [--weight-decay W] [--grad-clip C] \\
        [--lr-schedule constant|cosine] [--warmup-steps K] [--min-lr 0] \\
        [--heads H] [--dtype f32|f64] [--threads 2] [--quiet]

Contract, as implemented here:

* Initial weights: every floating-point ONNX initializer is copied by name into
  ``model.state_dict()``. Exports made with ``constant_folding=False`` keep torch's
  parameter names, and tied weights appear once. An initializer that is no parameter,
  a parameter with no initializer, or a shape mismatch is an error.
* Data: n tokens; global sample b of step s reads ``o = ((s*B + b) * T) % (n - T - 1)``,
  inputs ``tok[o:o+T]``, labels ``tok[o+1:o+T+1]`` (int64).
* Loss: logits models (gpt, llama, bert) get ``F.cross_entropy(logits.reshape(-1, V),
  labels.reshape(-1))``; gpt-loss is trained on its own output ``model(inputs, labels)``.
  With M micro-batches (consecutive slices of the global batch), each micro-batch loss
  is scaled by 1/M before backward, so the gradient and the logged loss are still the
  mean over the global batch.
* Optimizer: ``torch.optim.SGD(params, lr, momentum, weight_decay)`` or
  ``torch.optim.AdamW(params, lr, betas, eps, weight_decay)`` over all parameters;
  weight decay defaults to 0.01 for adamw and 0 for sgd.
* grad_norm is the global L2 norm of the gradients before clipping (what
  ``clip_grad_norm_`` returns); ``--grad-clip C`` clips with ``clip_grad_norm_``
  (C = 0, like no flag, means no clipping).
* Learning rate of step s (0-based), set before the optimizer step of step s:
  ``lr*(s+1)/K`` for s < K (K warm-up steps), then ``lr`` (constant) or
  ``min_lr + 0.5*(lr - min_lr)*(1 + cos(pi*(s - K)/max(1, steps - K)))`` (cosine).
* Log: one line per step, ``{"step": s, "loss": L, "lr": lr_s, "grad_norm": g}``, the
  floats written by ``json`` (shortest round-trip repr, >= 9 significant digits).

Library use::

    from torch_reference import train, logits
    model, losses = train("gpt", "gpt.onnx", "tokens.bin", 20,
                          dict(optimizer="sgd", lr=0.1, momentum=0.9, data_dtype="u8"))
    out = logits(model, input_ids)
"""
import argparse
import copy
import dataclasses
import json
import math
import os
import re
import sys
from typing import Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "models"))
import ppc_models  # noqa: E402

DATA_DTYPES = {"u8": np.dtype("u1"), "u16": np.dtype("<u2"), "i32": np.dtype("<i4")}
TORCH_DTYPES = {"f32": torch.float32, "f64": torch.float64}
# ONNX TensorProto element types that are floating point (float, float16, double,
# bfloat16): every initializer of these types is a trainable parameter.
ONNX_FLOAT_TYPES = {1, 10, 11, 16}


class ReferenceError(Exception):
    """Bad input to the reference trainer (model, weights, data or options)."""


@dataclasses.dataclass
class Options:
    """Training options; names and defaults follow ppc's TRAINING flags."""
    batch: Optional[int] = None          # global batch B [the model's batch dim]
    seq: Optional[int] = None            # sequence length T [the model's seq dim]
    micro_batches: int = 1
    optimizer: str = "adamw"             # sgd | adamw
    lr: float = 1e-3
    momentum: float = 0.0
    betas: Tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: Optional[float] = None  # None: 0.01 for adamw, 0 for sgd
    grad_clip: Optional[float] = None
    lr_schedule: str = "constant"        # constant | cosine
    warmup_steps: int = 0
    min_lr: float = 0.0
    data_dtype: str = "u16"              # u8 | u16 | i32
    dtype: str = "f32"                   # f32 | f64 (f64 only to investigate numerics)
    precision: str = "fp32"              # fp32 | bf16 | fp16 (LowModel) | bf16-torch (Bf16Model)
    loss_scale: float = 65536.0          # fp16: the initial loss scale
    loss_scale_growth_interval: int = 2000
    threads: int = 2
    log: Optional[str] = None            # JSON-lines file, one line per step
    heads: Optional[int] = None          # n_heads when it cannot be read from the ONNX
    quiet: bool = True                   # no progress lines on stderr

    @classmethod
    def make(cls, options):
        if options is None:
            return cls()
        if isinstance(options, cls):
            return options
        unknown = set(options) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ReferenceError(f"unknown option(s): {', '.join(sorted(unknown))}")
        return cls(**options)

    def resolved_weight_decay(self):
        if self.weight_decay is not None:
            return self.weight_decay
        return 0.01 if self.optimizer == "adamw" else 0.0


# --------------------------------------------------------------------------- data


def load_tokens(data, data_dtype="u16"):
    """Token ids as an int64 numpy array, from a file path or an array."""
    if isinstance(data, (str, os.PathLike)):
        if data_dtype not in DATA_DTYPES:
            raise ReferenceError(f"--data-dtype {data_dtype!r}: expected u8, u16 or i32")
        if not os.path.isfile(data):
            raise ReferenceError(f"--data {data}: no such file")
        dt = DATA_DTYPES[data_dtype]
        size = os.path.getsize(data)
        if size % dt.itemsize:
            raise ReferenceError(f"--data {data}: {size} bytes is not a whole number of "
                                 f"{data_dtype} tokens")
        tokens = np.fromfile(data, dtype=dt)
    else:
        tokens = np.asarray(data)
    return tokens.astype(np.int64)


def batch_windows(tokens, step, batch, seq):
    """Inputs and labels [batch, seq] (int64 tensors) of global step ``step``."""
    n = len(tokens)
    span = n - seq - 1
    if span <= 0:
        raise ReferenceError(f"data has {n} tokens; needs more than seq+1 = {seq + 1}")
    offsets = [((step * batch + b) * seq) % span for b in range(batch)]
    inputs = np.stack([tokens[o:o + seq] for o in offsets])
    labels = np.stack([tokens[o + 1:o + seq + 1] for o in offsets])
    return torch.from_numpy(inputs), torch.from_numpy(labels)


# --------------------------------------------------------------------- model setup


def _dims(value_info):
    """Static sizes (int) or symbolic names (str) of a graph input/output."""
    return [d.dim_param if d.dim_param else d.dim_value
            for d in value_info.type.tensor_type.shape.dim]


def _graph_inputs(graph):
    inits = {i.name for i in graph.initializer}
    return [i for i in graph.input if i.name not in inits]


def infer_kind(graph):
    """ppc_models kind of an exported graph, from its parameter and output names."""
    names = {i.name for i in graph.initializer}
    if len(graph.output) == 1 and graph.output[0].name == "loss":
        return "gpt-loss"
    if "tok.weight" in names:
        return "llama"
    if "embed.weight" in names:
        return "neox"
    if "ln_emb.weight" in names:
        return "bert"
    if "wte.weight" in names:
        return "gpt"
    raise ReferenceError("cannot tell the model kind from the initializer names "
                         "(was it exported with constant_folding=False?); pass --kind")


def _infer_heads(graph):
    """n_heads from split_heads' view(b, t, n_heads, hd): the third element of the
    4-element Concat that feeds the first attention Reshape."""
    from onnx import numpy_helper
    producer = {out: node for node in graph.node for out in node.output}

    def constant_scalar(name):
        node = producer.get(name)
        while node is not None and node.op_type in ("Unsqueeze", "Cast", "Identity"):
            node = producer.get(node.input[0])
        if node is None or node.op_type != "Constant":
            return None
        for attr in node.attribute:
            if attr.name == "value":
                value = numpy_helper.to_array(attr.t).reshape(-1)
                return int(value[0]) if value.size == 1 else None
        return None

    for node in graph.node:
        if node.op_type != "Reshape" or "attn" not in node.name:
            continue
        shape = producer.get(node.input[1])
        if shape is not None and shape.op_type == "Concat" and len(shape.input) == 4:
            heads = constant_scalar(shape.input[2])
            if heads:
                return heads
        if shape is not None and shape.op_type == "Constant":
            value = numpy_helper.to_array(shape.attribute[0].t).reshape(-1)
            if value.size == 4:
                return int(value[2])
    return None


def infer_cfg(kind, model_proto, heads=None):
    """A ppc_models config matching the parameter shapes of an exported graph."""
    graph = model_proto.graph
    shapes = {i.name: tuple(i.dims) for i in graph.initializer}
    emb = {"llama": "tok.weight", "neox": "embed.weight"}.get(kind, "wte.weight")
    if emb not in shapes:
        raise ReferenceError(f"{kind}: the ONNX graph has no initializer {emb!r} "
                             "(export with constant_folding=False)")
    vocab, d_model = shapes[emb]
    layers = {int(m.group(1)) for n in shapes for m in [re.match(r"blocks\.(\d+)\.", n)] if m}
    ffn_name = "blocks.0.w1.weight" if kind == "llama" else "blocks.0.mlp.0.weight"
    cfg = dict(vocab=vocab, d_model=d_model, n_layers=len(layers),
               ffn=shapes[ffn_name][0] if ffn_name in shapes else None)
    first = _dims(_graph_inputs(graph)[0])
    if isinstance(first[0], int) and first[0] > 0:
        cfg["batch"] = first[0]
    if "wpe.weight" in shapes:
        cfg["seq"] = shapes["wpe.weight"][0]
    elif len(first) > 1 and isinstance(first[1], int) and first[1] > 0:
        cfg["seq"] = first[1]
    cfg["n_heads"] = heads or _infer_heads(graph)
    if not cfg["n_heads"]:
        raise ReferenceError("cannot read the number of attention heads from the ONNX "
                             "graph; pass --heads")
    return cfg


def load_initializers(model, model_proto):
    """Copy every floating-point initializer of ``model_proto`` into ``model`` by name.

    Each initializer must name an entry of ``model.state_dict()`` with the same shape,
    and every parameter (tied ones count once) must receive one."""
    from onnx import numpy_helper
    entries = model.state_dict(keep_vars=True)
    loaded = set()
    with torch.no_grad():
        for init in model_proto.graph.initializer:
            if init.data_type not in ONNX_FLOAT_TYPES:
                continue
            if init.name not in entries:
                raise ReferenceError(
                    f"ONNX initializer {init.name!r} is not a parameter of the torch "
                    f"model (was it exported with constant_folding=False?)")
            target = entries[init.name]
            value = torch.from_numpy(np.array(numpy_helper.to_array(init)))
            if tuple(value.shape) != tuple(target.shape):
                raise ReferenceError(f"ONNX initializer {init.name!r} has shape "
                                     f"{tuple(value.shape)}, the torch parameter "
                                     f"{tuple(target.shape)}")
            if id(target) in loaded:
                raise ReferenceError(f"ONNX initializer {init.name!r} sets a tied "
                                     "parameter that another initializer already set")
            target.copy_(value.to(target.dtype))
            loaded.add(id(target))
    missing = [n for n, p in model.named_parameters() if id(p) not in loaded]
    if missing:
        raise ReferenceError("torch parameter(s) with no ONNX initializer: "
                             + ", ".join(missing))


def build(kind, cfg_or_onnx_path, options=None):
    """(model, batch, seq): the torch model with its initial weights and the default
    global batch and sequence length (the model's dims, or the options')."""
    opts = Options.make(options)
    dtype = TORCH_DTYPES[opts.dtype]
    if isinstance(cfg_or_onnx_path, dict):
        if kind is None:
            raise ReferenceError("a config needs a kind")
        cfg = dict(cfg_or_onnx_path)
        model = ppc_models.build_model(kind, cfg)   # the weights export() writes
        full = ppc_models._cfg(kind, cfg)
        batch, seq = full["batch"], full["seq"]
    else:
        import onnx
        path = os.fspath(cfg_or_onnx_path)
        if not os.path.isfile(path):
            raise ReferenceError(f"{path}: no such file")
        proto = onnx.load(path)
        kind = kind or infer_kind(proto.graph)
        cfg = infer_cfg(kind, proto, opts.heads)
        batch, seq = cfg.pop("batch", None), None
        dims = _dims(_graph_inputs(proto.graph)[0])
        if len(dims) > 1 and isinstance(dims[1], int) and dims[1] > 0:
            seq = dims[1]
        if "seq" not in cfg:
            cfg["seq"] = opts.seq or seq or ppc_models.DEFAULT_CFG["seq"]
        model = ppc_models.build_model(kind, cfg)
        load_initializers(model, proto)
    model = model.to(dtype)
    if dtype == torch.float64:
        # ONNX stores LayerNormalization's epsilon as a float32 attribute.
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.eps = float(np.float32(module.eps))
    batch, seq = opts.batch or batch, opts.seq or seq
    if not batch or not seq:
        raise ReferenceError("the model's batch or sequence dimension is symbolic; "
                             "pass --batch and --seq")
    return model, batch, seq


# ------------------------------------------------------------------------ training


def lr_at(step, steps, opts):
    """Learning rate of 0-based ``step`` of ``steps``."""
    k = opts.warmup_steps
    if step < k:
        return opts.lr * (step + 1) / k
    if opts.lr_schedule == "constant":
        return opts.lr
    if opts.lr_schedule == "cosine":
        progress = (step - k) / max(1, steps - k)
        return opts.min_lr + 0.5 * (opts.lr - opts.min_lr) * (1 + math.cos(math.pi * progress))
    raise ReferenceError(f"--lr-schedule {opts.lr_schedule!r}: expected constant or cosine")


def make_optimizer(params, opts):
    wd = opts.resolved_weight_decay()
    if opts.optimizer == "sgd":
        return torch.optim.SGD(params, lr=opts.lr, momentum=opts.momentum, weight_decay=wd)
    if opts.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=opts.lr, betas=tuple(opts.betas),
                                 eps=opts.eps, weight_decay=wd)
    raise ReferenceError(f"--optimizer {opts.optimizer!r}: expected sgd or adamw")


def _bind(args, kwargs, required, **optional):
    """The arguments of a __torch_function__ call in signature order: ``required``
    names, then ``optional`` ones with their defaults, from positions or keywords."""
    names = list(required) + list(optional)
    values = dict(optional)
    values.update(zip(names, args))
    values.update(kwargs)
    return tuple(values[n] for n in names)


class AsExported(torch.overrides.TorchFunctionMode):
    """Runs the ops that torch.onnx.export decomposes as the exported graph computes
    them, so that a bf16 model rounds where ppc's bf16 program does: linear as MatMul
    then Add of the bias, GELU as x/sqrt(2) -> Erf -> +1 -> *x -> *0.5, SiLU as
    x * Sigmoid(x), rsqrt as 1 / Sqrt; and LayerNorm computed in f32 and rounded once,
    as Megatron's fused kernel and ppc's layer_norm do (torch 1.13's CPU bf16
    layer_norm rounds intermediates). Each torch op computes in f32 and rounds its
    result once, like ppc's kernels. The backward is torch's own: its LayerNorm and
    softmax backward kernels compute in f32 and round once, as ppc computes those
    gradients; the rest rounds op by op on both sides. The models' attention,
    RMSNorm and rotary embedding are one op each too, as ppc-fuse-attention,
    ppc-fuse-rms-norm and ppc-fuse-rotary make them (_as_one_op); attention's
    backward rounds its probabilities and their gradient to ``dtype`` (the
    program's 16-bit type) before their products, as ppc's does
    (_LowAttention)."""

    SQRT2 = float(np.float32(math.sqrt(2.0)))   # the graph's f32 constant

    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype

    def __enter__(self):
        self._saved = (ppc_models.RMSNorm.forward, ppc_models.attention,
                       ppc_models.apply_rotary)
        rotary = ppc_models.apply_rotary
        ppc_models.RMSNorm.forward = lambda module, x: _as_one_op(
            _rms_norm, x, module.weight, eps=module.eps)
        low = _LowAttention(self.dtype)
        ppc_models.attention = lambda q, k, v, causal: _as_one_op(
            low, q, k, v, causal=causal)
        ppc_models.apply_rotary = lambda x, cos, sin: _as_one_op(rotary, x, cos, sin)
        return super().__enter__()

    def __exit__(self, *exc):
        (ppc_models.RMSNorm.forward, ppc_models.attention,
         ppc_models.apply_rotary) = self._saved
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            x, w, bias = _bind(args, kwargs, ("input", "weight"), bias=None)
            y = torch.matmul(x, w.t())
            return y if bias is None else bias + y
        if func is F.gelu and kwargs.get("approximate", "none") == "none":
            x = args[0]
            return (x * (torch.erf(x / self.SQRT2) + 1.0)) * 0.5
        if func is F.silu:
            x = args[0]
            return x * torch.sigmoid(x)
        if func is F.layer_norm:
            x, shape, w, b, eps = _bind(args, kwargs, ("input", "normalized_shape"),
                                        weight=None, bias=None, eps=1e-5)
            as_f32 = (lambda t: None if t is None else t.float())
            return F.layer_norm(x.float(), shape, as_f32(w), as_f32(b), eps).to(x.dtype)
        if func is torch.rsqrt:
            return 1.0 / torch.sqrt(args[0])
        return func(*args, **kwargs)


def _rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _as_one_op(ops, *tensors, **kwargs):
    """``ops(*tensors, **kwargs)`` as ppc's fused op (attention, rms_norm, rotary)
    computes it in bf16 or fp16: in f32 from the rounded inputs, the result rounded
    once (the ``.to``, which the modes see as the op), and its backward in f32 with
    each input's gradient rounded once. The ops run with the torch-function modes off so that LowOps does
    not round their intermediates (torch 1.13 has no public switch for that)."""
    inputs = [t.float() for t in tensors]   # under the modes: LowOps rounds their gradients
    with torch.overrides._no_torch_function_mode():
        y = ops(*inputs, **kwargs)
    return y.to(tensors[0].dtype)


def _LowAttention(dtype):
    """Attention (``ppc_models.attention_ops``'s function) as ppc computes it in
    ``dtype`` (executor/kernels/Contraction.cpp, FlashAttention's rounding). The
    forward, in double: the probabilities rounded to ``dtype`` before their product
    with v, relative to the row's max rounded up to a multiple of ln 2 (M = K ln 2; the
    max itself where it is 2^20 or more in magnitude, a row of masked keys):
    o = sum_j round(p_j) v_j / sum_j p_j, p_j = exp(s_j - M). The backward, in f32:
    P = exp(s - lse) and dS = P (dO v^T - D), D = dO . o with o as stored (rounded),
    each rounded to ``dtype`` before its products dv = P^T dO, dq = scale dS k and
    dk = scale dS^T q."""

    def low(t):
        return t.to(dtype).float()

    class LowAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal=False):
            s = ppc_models.attention_scores(q.double(), k.double(), causal)
            lse = torch.logsumexp(s, dim=-1, keepdim=True).float()
            top = s.amax(-1, keepdim=True)
            shift = torch.where(top.abs() < 2.0 ** 20,
                                torch.ceil(top / math.log(2)) * math.log(2), top)
            p = torch.exp(s - shift)
            o = ((p.to(dtype).double() @ v.double()) / p.sum(-1, keepdim=True)).float()
            ctx.save_for_backward(q, k, v, low(o), lse)
            ctx.causal = causal
            return o

        @staticmethod
        def backward(ctx, do):
            q, k, v, o, lse = ctx.saved_tensors
            p = torch.exp(ppc_models.attention_scores(q, k, ctx.causal) - lse)
            dv = low(p).transpose(-2, -1) @ do
            dp = do @ v.transpose(-2, -1)
            ds = low(p * (dp - (do * o).sum(-1, keepdim=True)))
            scale = 1.0 / math.sqrt(q.shape[-1])
            return (ds @ k) * scale, (ds.transpose(-2, -1) @ q) * scale, dv, None

    return lambda q, k, v, causal: LowAttention.apply(q, k, v, causal)


def _add_grads(copies, masters, as_master):
    """Adds each low-precision copy's gradient, made f32 by ``as_master``, to its
    master's (f32 accumulation over micro-batches), and clears the copy's."""
    for low, p in zip(copies, masters):
        if low.grad is None:
            continue
        g = as_master(low.grad)
        p.grad = g if p.grad is None else p.grad + g
        low.grad = None


class Bf16Model:
    """ppc's --precision bf16 (passes/MixedPrecision.cpp) on PyTorch's own bf16
    kernels, as Megatron-LM trains in bf16: a bf16 copy of the model computes forward and backward (every
    activation and activation gradient in bf16, each torch op computing in f32 and
    rounding once), refreshed from the f32 master weights before each step; the
    logits reach the cross-entropy as f32; each micro-batch's bf16 parameter
    gradients are added to the masters' f32 gradients; clipping and the optimizer
    run on the f32 masters."""

    def __init__(self, master):
        self.master = [p for p in master.parameters() if p.requires_grad]
        self.model = copy.deepcopy(master).to(torch.bfloat16)
        self.params = [p for p in self.model.parameters() if p.requires_grad]

    def refresh(self):
        with torch.no_grad():
            for low, p in zip(self.params, self.master):
                low.copy_(p)

    def backward(self, inputs, labels, scale):
        """Loss (f32) of one micro-batch times ``scale``; its gradient is added to
        the masters'."""
        with AsExported(torch.bfloat16):
            loss = loss_of(self.model, inputs, labels).float() * scale
        loss.backward()
        _add_grads(self.params, self.master, lambda g: g.float())
        return loss


def _rounder(dtype):
    """An autograd function that rounds to ``dtype`` (fp16 overflows to inf past
    65504), and so the gradient that flows back through it."""

    class RoundTo(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.to(dtype).float()

        @staticmethod
        def backward(ctx, g):
            return g.to(dtype).float()

    return RoundTo


_TWO_OVER_SQRT_PI = float(np.float32(2.0 / math.sqrt(math.pi)))

# The derivative of a unary op as ppc's gradient rule writes it (passes/autodiff/
# gradients/Elementwise.cpp), from its input x and result y, each op's result
# rounded by ``low``: ppc's program rounds every op, torch's backward kernel only
# its output. A factor a 16-bit type cannot hold (2/sqrt(pi)) is applied in f32.
_DERIVATIVES = {
    "erf": lambda x, y, low: low(low(torch.exp(-low(x * x))) * _TWO_OVER_SQRT_PI),
    "sigmoid": lambda x, y, low: low(y * low(1.0 - y)),
    "tanh": lambda x, y, low: low(1.0 - low(y * y)),
}


def _unary_rounded(name, dtype):
    """torch.<name> whose backward multiplies the adjoint by _DERIVATIVES[name]
    (the product is rounded where it flows into the input, as every gradient)."""
    op, derivative = getattr(torch, name), _DERIVATIVES[name]

    def low(t):
        return t.to(dtype).float()

    class UnaryRounded(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = op(x)
            ctx.save_for_backward(x, low(y))   # ppc's rule reads the rounded result
            return y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * derivative(x, y, low)

    return UnaryRounded


class LowOps(torch.overrides.TorchFunctionMode):
    """ppc's low-precision program emulated on an f32 model: the f32 result of every
    op on an activation (a tensor that requires grad, or is computed from one) is
    rounded to ``dtype``, and so is every gradient that flows back into it; a
    constant tensor such an op reads is rounded first (ppc casts it at use), a
    Python or one-element scalar is not (ppc computes the op in f32 then). Each op
    computes in f32 and rounds once, forward and backward, as ppc's do: the gradient
    each op sends to an activation it read is rounded before autograd sums the
    uses' (ppc's program, like a bf16 model, rounds each use's gradient and each add
    of them), and the unary ops whose derivative ppc's rule writes as several ops
    (_DERIVATIVES) round each of them. (torch 1.13 has few fp16 CPU kernels, and its
    bf16 ones round differently in the backward; this rounds where ppc's program
    does.)"""

    def __init__(self, dtype):
        super().__init__()
        self.round = _rounder(dtype).apply
        self.unary = {}
        for name in _DERIVATIVES:
            rounded = _unary_rounded(name, dtype).apply
            self.unary[getattr(torch, name)] = self.unary[getattr(torch.Tensor, name)] = rounded

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
        if not any(t.requires_grad for t in tensors):
            return func(*args, **kwargs)   # constants alone: f32, as ppc keeps them

        def constant(a):
            if (isinstance(a, torch.Tensor) and not a.requires_grad
                    and a.dtype == torch.float32 and a.numel() > 1):
                return self.round(a)
            return a

        def use(a):
            if isinstance(a, torch.Tensor) and a.requires_grad and a.dtype == torch.float32:
                return self.round(a)
            if isinstance(a, (tuple, list)):
                return type(a)(use(v) for v in a)
            return constant(a)
        args = tuple(use(a) for a in args)
        kwargs = {k: use(v) for k, v in kwargs.items()}
        if func in self.unary and len(args) == 1 and not kwargs:
            return self._round(self.unary[func](*args))
        return self._round(func(*args, **kwargs))

    def _round(self, value):
        if isinstance(value, torch.Tensor) and value.dtype == torch.float32:
            return self.round(value)
        if isinstance(value, (tuple, list)):
            return type(value)(self._round(v) for v in value)
        return value


class LowModel:
    """ppc's --precision bf16 or fp16 in PyTorch, rounding where ppc does (LowOps):
    an f32 copy of the model holds the masters rounded to ``dtype``, refreshed each
    step; its forward runs as exported (AsExported) under LowOps; the loss is
    computed in f32 from the logits, times ``scale`` (fp16's loss scale); each
    parameter's gradient is rounded to ``dtype`` (the gradient of ppc's low copy)
    and added to the masters' f32 gradient."""

    def __init__(self, master, dtype):
        self.dtype = dtype
        self.master = [p for p in master.parameters() if p.requires_grad]
        self.model = copy.deepcopy(master)
        self.params = [p for p in self.model.parameters() if p.requires_grad]

    def refresh(self):
        with torch.no_grad():
            for low, p in zip(self.params, self.master):
                low.copy_(p.to(self.dtype).float())

    def backward(self, inputs, labels, scale):
        """The loss of one micro-batch times ``scale``; its gradient is added to
        the masters'."""
        if is_loss_model(self.model):
            raise ReferenceError("--precision bf16/fp16 takes a model with logits")
        with LowOps(self.dtype), AsExported(self.dtype):
            out = self.model(inputs)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), labels.reshape(-1)) * scale
        loss.backward()
        _add_grads(self.params, self.master, lambda g: g.to(self.dtype).float())
        return loss


def is_loss_model(model):
    return isinstance(model, ppc_models.GPTLoss)


def logits(model, input_ids):
    """Logits [B, T, V] of ``model`` (for gpt-loss: of its GPT part) on int64 ids,
    without autograd."""
    ids = torch.as_tensor(input_ids, dtype=torch.int64)
    with torch.no_grad():
        if is_loss_model(model):
            return ppc_models.GPT.forward(model, ids)
        return model(ids)


def loss_of(model, inputs, labels):
    """The training loss of one (micro-)batch: the model's own scalar, or mean token
    cross-entropy of its logits."""
    if is_loss_model(model):
        return model(inputs, labels)
    out = model(inputs).float()   # a bf16 model's logits, as Megatron's loss reads them
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), labels.reshape(-1))


def grad_total_norm(params):
    """Global L2 norm of the gradients, computed as clip_grad_norm_ computes it."""
    grads = [p.grad.detach() for p in params if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    return torch.norm(torch.stack([torch.norm(g, 2.0) for g in grads]), 2.0)


def train(kind, cfg_or_onnx_path, data, steps, options=None):
    """Train ``kind`` (None: read from the ONNX file) from a config (seeded weights, as
    ppc_models.export writes them) or an ONNX file's initializers, for ``steps`` steps
    on ``data`` (a token file or an array). Returns (model, per-step losses); with
    ``options["log"]`` also writes the JSON-lines log."""
    opts = Options.make(options)
    torch.set_num_threads(opts.threads)
    model, batch, seq = build(kind, cfg_or_onnx_path, opts)
    tokens = load_tokens(data, opts.data_dtype)
    vocab = model.lm_head.out_features
    if len(tokens) and (tokens.min() < 0 or tokens.max() >= vocab):
        raise ReferenceError(f"token ids span [{tokens.min()}, {tokens.max()}]; the "
                             f"model's vocabulary is {vocab}")
    if hasattr(model, "wpe") and seq > model.wpe.num_embeddings:
        raise ReferenceError(f"--seq {seq} exceeds the position table "
                             f"({model.wpe.num_embeddings} rows)")
    m = opts.micro_batches
    if m < 1 or batch % m:
        raise ReferenceError(f"--micro-batches {m} does not divide --batch {batch}")
    if opts.warmup_steps < 0:
        raise ReferenceError("--warmup-steps must be >= 0")
    if opts.grad_clip is not None and opts.grad_clip < 0:
        raise ReferenceError("--grad-clip must be >= 0")

    model.train()   # no dropout in these models; eval and train modes compute the same
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(params, opts)
    if opts.precision not in ("fp32", "bf16", "fp16", "bf16-torch"):
        raise ReferenceError(f"--precision {opts.precision!r}: expected fp32, bf16, fp16 or "
                             "bf16-torch")
    low = {"bf16": lambda m: LowModel(m, torch.bfloat16),
           "fp16": lambda m: LowModel(m, torch.float16),
           "bf16-torch": Bf16Model}.get(opts.precision, lambda m: None)(model)
    # fp16's dynamic loss scale, as torch.cuda.amp.GradScaler keeps it (backoff 0.5,
    # growth 2 after growth_interval good steps; a step with a gradient that is not
    # finite is skipped).
    scale, good = float(opts.loss_scale), 0
    log = open(opts.log, "w") if opts.log else None
    losses = []
    try:
        for step in range(steps):
            inputs, labels = batch_windows(tokens, step, batch, seq)
            optimizer.zero_grad(set_to_none=True)
            if low:
                low.refresh()
            total = 0.0
            size = batch // m
            for j in range(m):
                part = slice(j * size, (j + 1) * size)
                if opts.precision == "fp16":
                    loss = low.backward(inputs[part], labels[part], scale / m) / scale
                elif opts.precision == "bf16":
                    loss = low.backward(inputs[part], labels[part], 1 / m)
                elif low:
                    loss = low.backward(inputs[part], labels[part], 1 / m)
                else:
                    loss = loss_of(model, inputs[part], labels[part])
                    if m > 1:
                        loss = loss / m
                    loss.backward()
                total += loss.item()
            overflow, scale_used = False, scale
            if opts.precision == "fp16":
                inverse = torch.tensor(1.0 / scale, dtype=torch.float64).float()
                for p in params:
                    if p.grad is not None:
                        p.grad.mul_(inverse)
                overflow = any(not bool(torch.isfinite(p.grad).all())
                               for p in params if p.grad is not None)
            if opts.grad_clip:
                norm = torch.nn.utils.clip_grad_norm_(params, opts.grad_clip)
            else:
                norm = grad_total_norm(params)
            lr = lr_at(step, steps, opts)
            for group in optimizer.param_groups:
                group["lr"] = lr
            if not overflow:
                optimizer.step()
            if opts.precision == "fp16":
                if overflow:
                    scale, good = scale * 0.5, 0
                else:
                    good += 1
                    if good == opts.loss_scale_growth_interval:
                        scale, good = scale * 2, 0
            losses.append(float(total))
            record = {"step": step, "loss": float(total), "lr": float(lr),
                      "grad_norm": float(norm) if math.isfinite(float(norm)) else None}
            if opts.precision == "fp16":
                record.update(loss_scale=scale_used, overflow=overflow)
            if log:
                log.write(json.dumps(record) + "\n")
                log.flush()
            if not opts.quiet:
                print(f"step {step + 1}/{steps}  loss {total:.6f}  lr {lr:.3e}  "
                      f"grad_norm {float(norm):.4e}", file=sys.stderr)
    finally:
        if log:
            log.close()
    model.eval()
    return model, losses


# ------------------------------------------------------------------------------ CLI


def _betas(text):
    try:
        b1, b2 = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected b1,b2, got {text!r}")
    return (b1, b2)


def main(argv=None):
    p = argparse.ArgumentParser(
        description="PyTorch reference trainer for ppc (DESIGN.md section 4): trains a "
                    "ppc_models ONNX export from its initializers and writes ppc's "
                    "JSON-lines log.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("model", metavar="MODEL.onnx",
                   help="ppc_models export made with constant_folding=False")
    p.add_argument("--kind", choices=ppc_models.KINDS, default=None,
                   help="model family (default: read from the initializer names)")
    p.add_argument("--data", required=True, help="flat token-id file")
    p.add_argument("--data-dtype", choices=sorted(DATA_DTYPES), default="u16")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--log", metavar="F.jsonl", help="JSON-lines log, one line per step")
    p.add_argument("--batch", type=int, help="global batch B (default: model's dim 0)")
    p.add_argument("--seq", type=int, help="sequence length T (default: model's dim 1)")
    p.add_argument("--micro-batches", type=int, default=1)
    p.add_argument("--optimizer", choices=("sgd", "adamw"), default="adamw")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--betas", type=_betas, default=(0.9, 0.999), help="b1,b2")
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--weight-decay", type=float, default=None,
                   help="default: 0.01 for adamw, 0 for sgd")
    p.add_argument("--grad-clip", type=float, default=None,
                   help="max global gradient norm (default, or 0: no clipping)")
    p.add_argument("--lr-schedule", choices=("constant", "cosine"), default="constant")
    p.add_argument("--warmup-steps", type=int, default=0)
    p.add_argument("--min-lr", type=float, default=0.0)
    p.add_argument("--heads", type=int, help="attention heads, if the ONNX graph does "
                                              "not show them")
    p.add_argument("--dtype", choices=sorted(TORCH_DTYPES), default="f32",
                   help="training precision (f64 only to investigate numerics)")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    a = p.parse_args(argv)
    fields = {f.name for f in dataclasses.fields(Options)}
    opts = Options(**{k: v for k, v in vars(a).items() if k in fields})
    try:
        train(a.kind, a.model, a.data, a.steps, opts)
    except ReferenceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
