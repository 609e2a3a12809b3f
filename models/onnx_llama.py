#!/usr/bin/python3
"""Write a LLaMA-shaped decoder as ONNX with every weight in external data, torch-free.

The graph follows what ``torch.onnx.export`` (opset 17) makes of Hugging Face
transformers 4.36's ``LlamaForCausalLM`` with eager attention, one input
``input_ids`` int64 [batch, seq] and one output ``logits`` f32 [batch, seq, vocab]
(the same inputs and output as ``models/ppc_models.py --kind llama``; ppc appends
the loss itself):

* node names scoped as torch scopes them (``/model/embed_tokens/Gather``,
  ``/model/layers.{i}/input_layernorm/Pow``, ``/model/layers.{i}/self_attn/q_proj/MatMul``,
  ``/model/layers.{i}/mlp/act_fn/Sigmoid``, ``/model/norm/...``, ``/lm_head/MatMul``,
  ``/Cast`` -> ``logits``), outputs named ``<node>_output_0``;
* initializers under the Hugging Face parameter names (``model.embed_tokens.weight``,
  ``model.layers.{i}.self_attn.q_proj.weight``, ..., ``model.norm.weight``,
  ``lm_head.weight``), each its own tensor (no eval-mode merging of equal norm
  weights), in ``named_parameters`` order, all in ONE external data file;
* RMSNorm as exported: Cast, Pow 2, ReduceMean(-1, keepdims), Add eps, Sqrt,
  Div(1, .), Mul, Cast, Mul(weight, .);
* Linear: ``--linear matmul`` (default) is the constant-folded form, MatMul by a
  weight stored transposed as [in, out] (torch would rename it ``onnx::MatMul_<n>``;
  the Hugging Face name is kept here); ``--linear transpose`` is the form without
  constant folding: the weight in Hugging Face's [out, in] layout, then Transpose
  (perm 1,0) and MatMul;
* rotary embedding: per layer cos and sin tables [seq, head_dim] under
  ``self_attn/rotary_emb`` (``--rotary computed``, default: computed from a
  [head_dim/2] inverse-frequency constant and a [seq, 1] position constant by
  Mul, Concat, Cos, Sin, which ppc folds at import; ``--rotary constant``: the tables
  as Constant nodes, as torch exports the cached buffers), Gather at the position ids
  (a [1, seq] constant) and Unsqueeze(1); rotate_half as Slice, Slice, Neg, Concat;
* the causal mask as transformers builds it (``_make_causal_mask``): a [seq, seq]
  fill of float32's lowest value (ConstantOfShape), Range, Add, Reshape, Less, Where,
  Unsqueeze, Unsqueeze, Expand to [batch, 1, seq, seq], added to the scores;
* grouped-query attention (``--kv-heads`` below ``--heads``): k_proj and v_proj of
  kv_heads x head_dim outputs, and transformers' repeat_kv after the rotary embedding
  (Unsqueeze(2), Expand to [batch, kv_heads, heads/kv_heads, seq, head_dim], Reshape to
  [batch, heads, seq, head_dim]);
* ``--batch 0``: a dynamic batch axis named ``batch`` (Reshape shapes copy it with 0;
  Expand broadcasts it from 1);
* attention: Q K^T MatMul, Div by sqrt(head_dim), Add mask, Softmax(-1), Cast, Cast,
  MatMul V, Transpose, Reshape, o_proj; SwiGLU MLP (gate_proj, Sigmoid, Mul, up_proj,
  Mul, down_proj); residual Adds; final RMSNorm; untied lm_head; a final Cast.

The weights are never materialised: every initializer points at its offset in
``<output>.data`` (offsets aligned to 4096 bytes), which is created as a sparse file
of the full size with ``os.truncate`` (its holes read as zeros). The model carries
the ``ppc.training`` metadata record that python/ppc_export.py writes (every
initializer trains; none frozen or tied), which torch.onnx.export does not: without
it ppc checks an eval-mode export for a split tied head by comparing
``model.embed_tokens.weight`` with ``lm_head.weight``, which are equal (all zeros) in
a sparse file (``--no-training-record`` leaves it out). ``--fill-random``
(at most 100 MB of weights) writes real values instead: linear and embedding
weights normal(0, 0.02), norm weights ones, as transformers initialises them.

    /usr/bin/python3 models/onnx_llama.py -o /tmp/llama7b/llama.onnx     # LLaMA-7B
    /usr/bin/python3 models/onnx_llama.py --layers 80 --hidden 8192 --heads 64 \\
        --kv-heads 8 --intermediate 28672 --batch 0 -o /tmp/llama70b/llama.onnx  # 70B
    /usr/bin/python3 models/onnx_llama.py --layers 2 --hidden 64 --heads 4 \\
        --intermediate 172 --vocab 256 --seq 16 --batch 2 --fill-random -o /tmp/s/llama.onnx
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
ALIGN = 4096
FILL_LIMIT = 100 * 1000 * 1000
INT64_MAX = 9223372036854775807


class GraphWriter:
    """Nodes named as torch.onnx.export names them: ``<scope>/<Op>`` then
    ``<scope>/<Op>_1``, ... per scope and op type; outputs ``<name>_output_<k>``."""

    def __init__(self):
        self.nodes = []
        self.counts = {}

    def node(self, scope, op, inputs, outputs=1, name=None, **attrs):
        if name is None:
            key = (scope, op)
            k = self.counts.get(key, 0)
            self.counts[key] = k + 1
            name = f"{scope}/{op}" + (f"_{k}" if k else "")
        if isinstance(outputs, int):
            outputs = [f"{name}_output_{j}" for j in range(outputs)]
        self.nodes.append(helper.make_node(op, list(inputs), outputs, name=name, **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def const(self, scope, value):
        """A Constant node holding ``value`` (a numpy array or scalar)."""
        return self.node(scope, "Constant", [], value=numpy_helper.from_array(np.asarray(value)))

    def i64(self, scope, values):
        return self.const(scope, np.array(values, dtype=np.int64))

    def f32(self, scope, value):
        return self.const(scope, np.array(value, dtype=np.float32))


def parameter_shapes(a):
    """(name, shape) in LlamaForCausalLM.named_parameters() order; linear weights in the
    shape they are stored in (``--linear``)."""
    d, f, v = a.hidden, a.intermediate, a.vocab
    kv = a.kv_heads * (d // a.heads)
    lin = (lambda o, i: (i, o)) if a.linear == "matmul" else (lambda o, i: (o, i))
    out = [("model.embed_tokens.weight", (v, d))]
    for i in range(a.layers):
        p = f"model.layers.{i}."
        out += [(p + "self_attn.q_proj.weight", lin(d, d)),
                (p + "self_attn.k_proj.weight", lin(kv, d)),
                (p + "self_attn.v_proj.weight", lin(kv, d)),
                (p + "self_attn.o_proj.weight", lin(d, d)),
                (p + "mlp.gate_proj.weight", lin(f, d)),
                (p + "mlp.up_proj.weight", lin(f, d)),
                (p + "mlp.down_proj.weight", lin(d, f)),
                (p + "input_layernorm.weight", (d,)),
                (p + "post_attention_layernorm.weight", (d,))]
    out += [("model.norm.weight", (d,)), ("lm_head.weight", lin(v, d))]
    return out


def layout(shapes):
    """[(name, shape, offset, length)] of float32 tensors in one file, and its size."""
    entries, offset = [], 0
    for name, shape in shapes:
        offset = (offset + ALIGN - 1) // ALIGN * ALIGN
        length = 4 * math.prod(shape)
        entries.append((name, shape, offset, length))
        offset += length
    return entries, offset


def external_initializer(name, shape, offset, length, location):
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(shape)
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)),
                       ("length", str(length))):
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    return t


def write_data(path, entries, total, fill_random, seed):
    """Create ``path`` of ``total`` bytes: sparse (all holes) unless ``fill_random``."""
    with open(path, "wb") as out:
        if fill_random:
            rng = np.random.default_rng(seed)
            for name, shape, offset, length in entries:
                if name.endswith("layernorm.weight") or name == "model.norm.weight":
                    values = np.ones(shape, dtype=np.float32)
                else:
                    values = (0.02 * rng.standard_normal(shape)).astype(np.float32)
                out.seek(offset)
                out.write(values.astype("<f4").tobytes())
    os.truncate(path, total)


def save(out, nodes, entries, total, batch, seq, vocab, producer, write, filled,
         training_record=True):
    """Write the model (``input_ids`` [batch, seq] -> ``logits`` [batch, seq, vocab];
    batch 0: the dynamic axis ``batch``) to ``out``, its initializers ``entries``
    (layout()) pointing into ``out.data``, which ``write(path)`` creates; with the
    ``ppc.training`` record (every initializer trains) unless told not to."""
    out_dir = os.path.dirname(os.path.abspath(out))
    os.makedirs(out_dir, exist_ok=True)
    location = os.path.basename(out) + ".data"
    inits = [external_initializer(n, s, o, l, location) for n, s, o, l in entries]
    b = batch or "batch"
    graph = helper.make_graph(
        nodes, "main_graph",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [b, seq])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [b, seq, vocab])],
        initializer=inits)
    model = helper.make_model(graph, producer_name=producer,
                              opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    if training_record:
        helper.set_model_props(model, {"ppc.training": json.dumps(
            {"format": 1, "parameters": [n for n, *_ in entries], "frozen": [], "tied": {}})})
    write(os.path.join(out_dir, location))
    with open(out, "wb") as f:
        f.write(model.SerializeToString())
    params = sum(l for *_, l in entries) // 4
    print(f"wrote {out} ({len(nodes)} nodes, {len(inits)} initializers, {params} "
          f"parameters) and {location} ({total} bytes, {'random' if filled else 'sparse'})",
          file=sys.stderr)


def build_graph(a, init_names):
    g = GraphWriter()
    # A dynamic batch (--batch 0) is 0 in Reshape's shapes (copy the input's) and 1 in
    # Expand's (broadcast).
    B, T, D, H, V = a.batch, a.seq, a.hidden, a.heads, a.vocab
    KV = a.kv_heads
    hd = D // H
    W = init_names

    def linear(scope, x, weight):
        if a.linear == "transpose":
            weight = g.node(scope, "Transpose", [weight], perm=[1, 0])
        return g.node(scope, "MatMul", [x, weight])

    def rms_norm(scope, x, weight):
        c = g.node(scope, "Cast", [x], to=TensorProto.FLOAT)
        p = g.node(scope, "Pow", [c, g.f32(scope, 2.0)])
        r = g.node(scope, "ReduceMean", [p], axes=[-1], keepdims=1)
        s = g.node(scope, "Sqrt", [g.node(scope, "Add", [r, g.f32(scope, a.rms_eps)])])
        y = g.node(scope, "Mul", [c, g.node(scope, "Div", [g.f32(scope, 1.0), s])])
        y = g.node(scope, "Cast", [y], to=TensorProto.FLOAT)
        return g.node(scope, "Mul", [weight, y]), c

    # Position ids (arange(seq)[None]) and the token embedding.
    position_ids = g.i64("/model", np.arange(T, dtype=np.int64)[None, :])
    x = g.node("/model/embed_tokens", "Gather", [W["model.embed_tokens.weight"], "input_ids"])

    # Causal mask, transformers' _make_causal_mask: full(min), masked_fill(arange <
    # (arange + 1).view(T, 1), 0), [None, None], expand(B, 1, T, T).
    s = "/model"
    full = g.node(s, "ConstantOfShape", [g.i64(s, [T, T])],
                  value=numpy_helper.from_array(np.array([np.finfo(np.float32).min],
                                                         dtype=np.float32)))
    cond = g.node(s, "Range", [g.i64(s, 0), g.i64(s, T), g.i64(s, 1)])
    rows = g.node(s, "Reshape", [g.node(s, "Add", [cond, g.i64(s, 1)]), g.i64(s, [T, 1])])
    keep = g.node(s, "Less", [cond, rows])
    mask = g.node(s, "Where", [keep, g.f32(s, 0.0), full])
    mask = g.node(s, "Unsqueeze", [mask, g.i64(s, [0])])
    mask = g.node(s, "Unsqueeze", [mask, g.i64(s, [1])])
    mask = g.node(s, "Expand", [mask, g.i64(s, [B or 1, 1, T, T])])

    # Rotary tables as LlamaRotaryEmbedding caches them (float32).
    inv_freq = (1.0 / (a.rope_theta ** (np.arange(0, hd, 2, dtype=np.int64)
                                        .astype(np.float32) / hd))).astype(np.float32)
    t = np.arange(T, dtype=np.float32)
    emb = np.concatenate([np.outer(t, inv_freq)] * 2, axis=-1).astype(np.float32)

    for i in range(a.layers):
        L = f"/model/layers.{i}"
        P = f"model.layers.{i}."
        A = L + "/self_attn"
        h, residual = rms_norm(L + "/input_layernorm", x, W[P + "input_layernorm.weight"])
        q = linear(A + "/q_proj", h, W[P + "self_attn.q_proj.weight"])
        k = linear(A + "/k_proj", h, W[P + "self_attn.k_proj.weight"])
        v = linear(A + "/v_proj", h, W[P + "self_attn.v_proj.weight"])
        shapes = [g.i64(A, [B, T, heads, hd]) for heads in (H, KV, KV)]
        q, k, v = (g.node(A, "Transpose", [g.node(A, "Reshape", [y, sh])], perm=[0, 2, 1, 3])
                   for y, sh in zip((q, k, v), shapes))
        R = A + "/rotary_emb"
        if a.rotary == "constant":
            cos_t = g.f32(R, np.cos(emb))
            sin_t = g.f32(R, np.sin(emb))
        else:
            freqs = g.node(R, "Mul", [g.f32(R, t[:, None]), g.f32(R, inv_freq[None, :])])
            both = g.node(R, "Concat", [freqs, freqs], axis=-1)
            cos_t, sin_t = g.node(R, "Cos", [both]), g.node(R, "Sin", [both])
        cos = g.node(A, "Gather", [cos_t, position_ids], axis=0)
        cos = g.node(A, "Unsqueeze", [cos, g.i64(A, [1])])
        sin = g.node(A, "Gather", [sin_t, position_ids], axis=0)
        sin = g.node(A, "Unsqueeze", [sin, g.i64(A, [1])])

        def rotate(y):
            first = g.node(A, "Mul", [y, cos])
            x1 = g.node(A, "Slice", [y, g.i64(A, [0]), g.i64(A, [hd // 2]), g.i64(A, [3]),
                                     g.i64(A, [1])])
            x2 = g.node(A, "Slice", [y, g.i64(A, [hd // 2]), g.i64(A, [INT64_MAX]),
                                     g.i64(A, [3]), g.i64(A, [1])])
            half = g.node(A, "Concat", [g.node(A, "Neg", [x2]), x1], axis=-1)
            return g.node(A, "Add", [first, g.node(A, "Mul", [half, sin])])

        q, k = rotate(q), rotate(k)
        if KV != H:
            # transformers' repeat_kv: [B, KV, T, hd] -> [B, KV, 1, T, hd], Expand to
            # [B, KV, H/KV, T, hd], Reshape to [B, H, T, hd].
            def repeat_kv(y):
                y = g.node(A, "Unsqueeze", [y, g.i64(A, [2])])
                y = g.node(A, "Expand", [y, g.i64(A, [B or 1, KV, H // KV, T, hd])])
                return g.node(A, "Reshape", [y, g.i64(A, [B, H, T, hd])])
            k, v = repeat_kv(k), repeat_kv(v)
        kt = g.node(A, "Transpose", [k], perm=[0, 1, 3, 2])
        scores = g.node(A, "Div", [g.node(A, "MatMul", [q, kt]), g.f32(A, math.sqrt(hd))])
        scores = g.node(A, "Add", [scores, mask])
        probs = g.node(A, "Softmax", [scores], axis=-1)
        probs = g.node(A, "Cast", [probs], to=TensorProto.FLOAT)
        probs = g.node(A, "Cast", [probs], to=TensorProto.FLOAT)
        o = g.node(A, "Transpose", [g.node(A, "MatMul", [probs, v])], perm=[0, 2, 1, 3])
        o = g.node(A, "Reshape", [o, g.i64(A, [B, T, D])])
        o = linear(A + "/o_proj", o, W[P + "self_attn.o_proj.weight"])
        x = g.node(L, "Add", [residual, o])

        M = L + "/mlp"
        h, residual = rms_norm(L + "/post_attention_layernorm", x,
                               W[P + "post_attention_layernorm.weight"])
        gate = linear(M + "/gate_proj", h, W[P + "mlp.gate_proj.weight"])
        act = g.node(M + "/act_fn", "Mul", [gate, g.node(M + "/act_fn", "Sigmoid", [gate])])
        up = linear(M + "/up_proj", h, W[P + "mlp.up_proj.weight"])
        down = linear(M + "/down_proj", g.node(M, "Mul", [act, up]),
                      W[P + "mlp.down_proj.weight"])
        x = g.node(L, "Add", [residual, down])

    h, _ = rms_norm("/model/norm", x, W["model.norm.weight"])
    logits = linear("/lm_head", h, W["lm_head.weight"])
    g.node("", "Cast", [logits], outputs=["logits"], to=TensorProto.FLOAT)
    return g.nodes


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--intermediate", type=int, default=11008)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--seq", type=int, default=4096, help="sequence length (static)")
    p.add_argument("--kv-heads", type=int, default=None,
                   help="key/value heads (grouped-query attention, transformers' repeat_kv); "
                        "default: --heads")
    p.add_argument("--batch", type=int, default=1,
                   help="batch size (static); 0: a dynamic batch axis 'batch' (bind it with "
                        "ppc's --batch or --dim batch=N)")
    p.add_argument("--rms-eps", type=float, default=1e-6)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--linear", choices=("matmul", "transpose"), default="matmul",
                   help="matmul: weights stored [in, out] (torch's constant-folded form); "
                        "transpose: [out, in] + Transpose (torch without folding)")
    p.add_argument("--rotary", choices=("computed", "constant"), default="computed",
                   help="cos/sin tables computed from small constants, or stored as "
                        "Constant nodes [seq, head_dim] per layer")
    p.add_argument("--fill-random", action="store_true",
                   help="write random weights instead of a sparse file (<= 100 MB)")
    p.add_argument("--seed", type=int, default=0, help="seed of --fill-random")
    p.add_argument("--no-training-record", action="store_true",
                   help="leave out the 'ppc.training' metadata (every initializer trains, "
                        "none frozen or tied); without it ppc compares embed_tokens with "
                        "lm_head, which are equal (zeros) in a sparse file, and warns of a "
                        "split tie")
    p.add_argument("-o", "--out", required=True, help="ONNX file; weights go to OUT.data")
    a = p.parse_args(argv)
    if a.hidden % a.heads or (a.hidden // a.heads) % 2:
        p.error("--hidden must be a multiple of --heads with an even head dimension")
    if a.kv_heads is None:
        a.kv_heads = a.heads
    if min(a.layers, a.hidden, a.heads, a.kv_heads, a.intermediate, a.vocab, a.seq) < 1 \
            or a.batch < 0:
        p.error("sizes must be positive")
    if a.heads % a.kv_heads:
        p.error("--heads must be a multiple of --kv-heads")

    entries, total = layout(parameter_shapes(a))
    if a.fill_random and total > FILL_LIMIT:
        p.error(f"--fill-random refuses {total} bytes of weights (limit {FILL_LIMIT})")
    nodes = build_graph(a, {n: n for n, _, _, _ in entries})
    save(a.out, nodes, entries, total, a.batch, a.seq, a.vocab, "onnx_llama.py",
         lambda path: write_data(path, entries, total, a.fill_random, a.seed),
         a.fill_random, training_record=not a.no_training_record)

if __name__ == "__main__":
    main()
