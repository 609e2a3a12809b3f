#!/usr/bin/env python3
"""Builds small ONNX models for the importer's lit tests.

Each model exercises one import path: an opset-dependent op form, a folded
shape computation, or a malformed input that must produce a one-line error.

    /usr/bin/python3 make_models.py OUT_DIR NAME [NAME ...]
    /usr/bin/python3 make_models.py --list
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32 = TensorProto.FLOAT
I64 = TensorProto.INT64


def model(nodes, inputs, outputs, inits=(), opset=17, name="m"):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def save(m, out_dir, name):
    onnx.save(m, os.path.join(out_dir, name + ".onnx"))


# --- opset-dependent forms -------------------------------------------------

def reduce_mean_axes_input(out):
    """Opset 18: ReduceMean takes its axes as an input."""
    save(model([helper.make_node("ReduceMean", ["x", "axes"], ["y"], name="mean",
                                 keepdims=1)],
               [vi("x", F32, [2, 3, 4])], [vi("y", F32, [2, 3, 1])],
               [i64("axes", [-1])], opset=18), out, "reduce_mean_axes_input")


def reduce_mean_axes_attr(out):
    """Opset 17: ReduceMean takes its axes as an attribute."""
    save(model([helper.make_node("ReduceMean", ["x"], ["y"], name="mean",
                                 axes=[0, -1], keepdims=0)],
               [vi("x", F32, [2, 3, 4])], [vi("y", F32, [3])], opset=17),
         out, "reduce_mean_axes_attr")


def split_num_outputs(out):
    """Opset 18: Split by num_outputs, the last chunk smaller."""
    save(model([helper.make_node("Split", ["x"], ["a", "b", "c"], name="split",
                                 axis=1, num_outputs=3)],
               [vi("x", F32, [2, 7])],
               [vi("a", F32, [2, 3]), vi("b", F32, [2, 3]), vi("c", F32, [2, 1])],
               opset=18), out, "split_num_outputs")


def split_sizes_input(out):
    """Opset 13: Split sizes come as an input."""
    save(model([helper.make_node("Split", ["x", "sizes"], ["a", "b"], name="split",
                                 axis=-1)],
               [vi("x", F32, [2, 7])], [vi("a", F32, [2, 2]), vi("b", F32, [2, 5])],
               [i64("sizes", [2, 5])], opset=13), out, "split_sizes_input")


def shape_arithmetic(out):
    """A torch-style dynamic reshape: Shape -> Gather -> Div -> Concat ->
    Reshape, plus ConstantOfShape, Range and Expand; all of it folds."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "i0"], ["b"], name="gather_b", axis=0),
        helper.make_node("Gather", ["s", "i2"], ["h"], name="gather_h", axis=0),
        helper.make_node("Div", ["h", "heads"], ["hd"], name="div"),
        helper.make_node("Unsqueeze", ["b", "zero"], ["b1"], name="unsq_b"),
        helper.make_node("Unsqueeze", ["hd", "zero"], ["hd1"], name="unsq_hd"),
        helper.make_node("Concat", ["b1", "minus1", "heads1", "hd1"], ["shape4"],
                         name="concat", axis=0),
        helper.make_node("Reshape", ["x", "shape4"], ["y"], name="reshape"),
        helper.make_node("Range", ["start", "limit", "delta"], ["pos"], name="range"),
        helper.make_node("ConstantOfShape", ["s"], ["zeros"], name="zeros",
                         value=numpy_helper.from_array(np.array([1.5], np.float32))),
        helper.make_node("Expand", ["pos", "bt"], ["pos2"], name="expand"),
        helper.make_node("Cast", ["pos2"], ["posf"], name="cast", to=F32),
    ]
    inits = [i64("i0", 0), i64("i2", 2), i64("heads", 4), i64("zero", [0]),
             i64("minus1", [-1]), i64("heads1", [4]), i64("start", 0),
             i64("limit", 8), i64("delta", 1), i64("bt", [2, 8])]
    save(model(nodes, [vi("x", F32, [2, 8, 16])],
               [vi("y", F32, [2, 8, 4, 4]), vi("zeros", F32, [2, 8, 16]),
                vi("posf", F32, [2, 8])], inits), out, "shape_arithmetic")


def slice_negative_steps(out):
    """Slice with negative steps, negative starts and INT64 sentinel ends."""
    big = np.iinfo(np.int64)
    save(model([helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"],
                                 name="slice")],
               [vi("x", F32, [4, 10])], [vi("y", F32, [4, 5])],
               [i64("st", [-1, 0]), i64("en", [big.min, big.max]), i64("ax", [1, 0]),
                i64("sp", [-2, 1])]), out, "slice_negative_steps")


def matmul_gemm_einsum(out):
    """MatMul with a 1-D operand, Gemm with transposes, implicit einsum."""
    nodes = [
        helper.make_node("MatMul", ["x", "v"], ["mv"], name="matvec"),
        helper.make_node("Gemm", ["a", "b", "c"], ["g"], name="gemm", transA=1,
                         transB=1, alpha=2.0, beta=0.5),
        helper.make_node("Einsum", ["x", "w"], ["e"], name="einsum",
                         equation="...ij,jk"),
    ]
    save(model(nodes,
               [vi("x", F32, [2, 3, 4]), vi("v", F32, [4]), vi("a", F32, [4, 3]),
                vi("b", F32, [5, 4]), vi("c", F32, [5]), vi("w", F32, [4, 6])],
               [vi("mv", F32, [2, 3]), vi("g", F32, [3, 5]), vi("e", F32, [2, 3, 6])],
               opset=13), out, "matmul_gemm_einsum")


def loss_ops(out):
    """SoftmaxCrossEntropyLoss with ignore_index, and NLL without it."""
    nodes = [
        helper.make_node("SoftmaxCrossEntropyLoss", ["s", "t"], ["l", "lp"],
                         name="sce", ignore_index=-100, reduction="mean"),
        helper.make_node("NegativeLogLikelihoodLoss", ["lp", "t"], ["n"], name="nll",
                         reduction="none"),
    ]
    save(model(nodes, [vi("s", F32, [6, 10]), vi("t", I64, [6])],
               [vi("l", F32, []), vi("lp", F32, [6, 10]), vi("n", F32, [6])],
               opset=13), out, "loss_ops")


def external_data_ok(out):
    """A parameter stored as external data next to the model."""
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    with open(os.path.join(out, "weights.bin"), "wb") as f:
        f.write(w.tobytes())
    save(model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
               [vi("x", F32, [4, 2])], [vi("y", F32, [4, 3])],
               [external_tensor("w", [2, 3], "weights.bin", 0, 24)]),
         out, "external_data_ok")


# --- bad input -------------------------------------------------------------

def external_tensor(name, dims, location, offset=None, length=None):
    t = TensorProto()
    t.name = name
    t.data_type = F32
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    entries = [("location", location)]
    if offset is not None:
        entries.append(("offset", str(offset)))
    if length is not None:
        entries.append(("length", str(length)))
    for k, v in entries:
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def external_model(out, name, location, length=16):
    save(model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
               [vi("x", F32, [2, 2])], [vi("y", F32, [2, 2])],
               [external_tensor("w", [2, 2], location, 0, length)]), out, name)


def external_constant(out):
    """A Constant node whose tensor attribute is stored as external data (as
    torch writes large constants of large models)."""
    mask = np.tril(np.ones((4, 4), dtype=bool))
    with open(os.path.join(out, "mask.bin"), "wb") as f:
        f.write(mask.tobytes())
    t = TensorProto()
    t.name = "mask"
    t.data_type = TensorProto.BOOL
    t.dims.extend([4, 4])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "mask.bin"), ("offset", "0"), ("length", "16")):
        e = t.external_data.add()
        e.key, e.value = k, v
    nodes = [helper.make_node("Constant", [], ["m"], name="mask_const", value=t),
             helper.make_node("Where", ["m", "x", "zero"], ["y"], name="where")]
    save(model(nodes, [vi("x", F32, [4, 4])], [vi("y", F32, [4, 4])],
               [numpy_helper.from_array(np.array(0, np.float32), "zero")]),
         out, "external_constant")


def external_escape(out):
    """External data that points outside the model's directory."""
    external_model(out, "external_escape", "../x")


def external_absolute(out):
    external_model(out, "external_absolute", "/etc/hostname")


def external_symlink(out):
    target = os.path.join(out, "real.bin")
    with open(target, "wb") as f:
        f.write(b"\0" * 16)
    link = os.path.join(out, "link.bin")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink("real.bin", link)
    external_model(out, "external_symlink", "link.bin")


def external_short(out):
    with open(os.path.join(out, "short.bin"), "wb") as f:
        f.write(b"\0" * 8)
    external_model(out, "external_short", "short.bin")


def external_hardlink(out):
    """External data that is a hard link (to a file that could be anywhere)."""
    secret = os.path.join(out, "elsewhere", "secret.bin")
    os.makedirs(os.path.dirname(secret), exist_ok=True)
    with open(secret, "wb") as f:
        f.write(b"\0" * 16)
    link = os.path.join(out, "hard.bin")
    if os.path.lexists(link):
        os.remove(link)
    os.link(secret, link)
    external_model(out, "external_hardlink", "hard.bin")


def external_linked_dir(out):
    """External data reached through a symbolic link to a directory."""
    inner = os.path.join(out, "inner")
    os.makedirs(inner, exist_ok=True)
    with open(os.path.join(inner, "data.bin"), "wb") as f:
        f.write(b"\0" * 16)
    link = os.path.join(out, "via")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink("inner", link)
    external_model(out, "external_linked_dir", "via/data.bin")


def external_nul(out):
    """A location with an embedded NUL (the kernel would see 'real.bin')."""
    with open(os.path.join(out, "real.bin"), "wb") as f:
        f.write(b"\0" * 16)
    external_model(out, "external_nul", "real.bin\0../../etc/passwd")


def two_unsupported(out):
    """Two unsupported ops: both must be named in one run."""
    nodes = [
        helper.make_node("Hardmax", ["x"], ["a"], name="hm"),
        helper.make_node("Relu", ["a"], ["b"], name="relu"),
        helper.make_node("FancyOp", ["b"], ["y"], name="fancy", domain="com.example"),
    ]
    m = model(nodes, [vi("x", F32, [2, 2])], [vi("y", F32, [2, 2])])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    save(m, out, "two_unsupported")


def malformed(out):
    with open(os.path.join(out, "malformed.onnx"), "wb") as f:
        f.write(b"\x0a\xff\xff\xff\xff\x0fthis is not a protobuf")


def raw_data_mismatch(out):
    t = numpy_helper.from_array(np.zeros((2, 2), np.float32), "w")
    t.raw_data = t.raw_data[:10]
    save(model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
               [vi("x", F32, [2, 2])], [vi("y", F32, [2, 2])], [t]),
         out, "raw_data_mismatch")


def dangling_input(out):
    save(model([helper.make_node("Add", ["x", "nowhere"], ["y"], name="add")],
               [vi("x", F32, [2, 2])], [vi("y", F32, [2, 2])]), out, "dangling_input")


def wrong_input_count(out):
    save(model([helper.make_node("Add", ["x", "x", "x"], ["y"], name="add3")],
               [vi("x", F32, [2, 2])], [vi("y", F32, [2, 2])]), out, "wrong_input_count")


def symbolic_dim(out):
    save(model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
               [vi("x", F32, ["batch", 4])], [vi("y", F32, ["batch", 4])]),
         out, "symbolic_dim")


def new_opset(out):
    """An opset newer than ppc knows."""
    save(model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
               [vi("x", F32, [2])], [vi("y", F32, [2])], opset=22), out, "new_opset")


def legacy_broadcast(out):
    """Opset 6 Add with the legacy broadcast/axis attributes."""
    save(model([helper.make_node("Add", ["x", "z"], ["y"], name="add6", broadcast=1,
                                 axis=0)],
               [vi("x", F32, [2, 3]), vi("z", F32, [2])], [vi("y", F32, [2, 3])],
               opset=6), out, "legacy_broadcast")


def softmax_opset11(out):
    """Opset 11 Softmax coerces its input to 2-D at axis (default 1)."""
    save(model([helper.make_node("Softmax", ["x"], ["y"], name="sm")],
               [vi("x", F32, [2, 3, 4])], [vi("y", F32, [2, 3, 4])], opset=11),
         out, "softmax_opset11")


def bad_shapes(out):
    """An Add whose operand shapes do not broadcast."""
    save(model([helper.make_node("Add", ["x", "z"], ["y"], name="bad_add")],
               [vi("x", F32, [2, 3]), vi("z", F32, [4, 3])], [vi("y", F32, [2, 3])]),
         out, "bad_shapes")


# --- which initializers train ----------------------------------------------

def f32(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.float32), name)


def two_scales(out, name, second_scale, extra_nodes=(), inits=(), first="/l0/Mul",
               second="/l1/Mul", metadata=None):
    """y = x * w0 * w1 through nodes named like torch's scopes."""
    nodes = list(extra_nodes) + [
        helper.make_node("Mul", ["x", "l0.w"], ["h"], name=first),
        helper.make_node("Mul", ["h", second_scale], ["y"], name=second)]
    m = model(nodes, [vi("x", F32, [2, 4])], [vi("y", F32, [2, 4])],
              [f32("l0.w", [1, 1, 1, 1])] + list(inits))
    if metadata is not None:
        m.metadata_props.add(key="ppc.training", value=metadata)
    save(m, out, name)


def merged_identity(out):
    """Eval-mode deduplication: l1.w is an Identity of the equal l0.w."""
    two_scales(out, "merged_identity", "l1.w",
               [helper.make_node("Identity", ["l0.w"], ["l1.w"], name="Identity_0")])


def merged_direct(out):
    """The same merge with the Identity removed: l0.w feeds two modules' Muls."""
    two_scales(out, "merged_direct", "l0.w")


def shared_module(out):
    """ALBERT's sharing: one module (its second call is '/l0_1/') runs twice."""
    two_scales(out, "shared_module", "l0.w", second="/l0_1/Mul")


def tied_split(out):
    """Constant folding split a tied embedding: 'onnx::MatMul_9' is emb.weight^T."""
    emb = np.arange(24, dtype=np.float32).reshape(6, 4) / 10
    nodes = [helper.make_node("Gather", ["emb.weight", "ids"], ["h"], name="/emb/Gather"),
             helper.make_node("MatMul", ["h", "onnx::MatMul_9"], ["logits"],
                              name="/lm_head/MatMul")]
    save(model(nodes, [vi("ids", I64, [2, 3])], [vi("logits", F32, [2, 3, 6])],
               [numpy_helper.from_array(emb, "emb.weight"),
                numpy_helper.from_array(emb.T.copy(), "onnx::MatMul_9")]),
         out, "tied_split")


def training_record(out):
    """The export helper's record: l0.w trains, buf is frozen (a buffer)."""
    two_scales(out, "training_record", "buf", inits=[f32("buf", [2, 2, 2, 2])],
               metadata='{"format": 1, "parameters": ["l0.w"], "frozen": ["buf"], '
                        '"tied": {}}')


def bad_record(out):
    """A record naming an initializer the graph does not have."""
    two_scales(out, "bad_record", "l0.w",
               metadata='{"format": 1, "parameters": ["l0.w", "nope"], "frozen": []}')


def shared_lookups(out):
    """T5/BART's shared embedding: one table read by the encoder's and the
    decoder's lookups; and an Identity of a parameter the exporter named itself."""
    emb = np.arange(24, dtype=np.float32).reshape(6, 4) / 10
    nodes = [helper.make_node("Gather", ["shared.weight", "ids"], ["e"],
                              name="/encoder/embed_tokens/Gather"),
             helper.make_node("Gather", ["shared.weight", "ids"], ["d"],
                              name="/decoder/embed_tokens/Gather"),
             helper.make_node("Identity", ["shared.weight"], ["onnx::Mul_5"], name="Identity_0"),
             helper.make_node("Add", ["e", "d"], ["s"], name="/add"),
             helper.make_node("Gather", ["onnx::Mul_5", "ids"], ["f"], name="/lm/Gather"),
             helper.make_node("Add", ["s", "f"], ["y"], name="/add2")]
    save(model(nodes, [vi("ids", I64, [2, 3])], [vi("y", F32, [2, 3, 4])],
               [numpy_helper.from_array(emb, "shared.weight")]), out, "shared_lookups")


def tile_overflow(out):
    """Tile whose repeats overflow the result's size."""
    save(model([helper.make_node("Tile", ["x", "r"], ["y"], name="tile")],
               [vi("x", F32, [4])], [vi("y", F32, [None])], [i64("r", [2 ** 62])]),
         out, "tile_overflow")


def onehot_depth(out):
    """OneHot with a depth of 2^40."""
    save(model([helper.make_node("OneHot", ["i", "depth", "v"], ["y"], name="onehot")],
               [vi("i", I64, [3])], [vi("y", F32, [3, None])],
               [i64("depth", [2 ** 40]), f32("v", [0, 1])]),
         out, "onehot_depth")


def argmax_empty_axis(out):
    """ArgMax along an axis of size 0 (no largest element)."""
    save(model([helper.make_node("ArgMax", ["x"], ["y"], axis=1, name="argmax")],
               [vi("x", F32, [3, 0])], [vi("y", I64, [3, 1])]),
         out, "argmax_empty_axis")


def twice_record(out):
    """A record listing l0.w as a parameter and as frozen."""
    two_scales(out, "twice_record", "l0.w",
               metadata='{"format": 1, "parameters": ["l0.w"], "frozen": ["l0.w"]}')


def bad_json_record(out):
    """A record that is not JSON."""
    two_scales(out, "bad_json_record", "l0.w", metadata='{"format": 1, "parameters": [')


def masked_lm(out):
    """logits = emb[input_ids] * attention_mask, with a token file for it (ids < 8)."""
    nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["h"], name="lookup"),
             helper.make_node("Cast", ["attention_mask"], ["m"], name="cast", to=F32),
             helper.make_node("Unsqueeze", ["m", "last"], ["m3"], name="unsqueeze"),
             helper.make_node("Mul", ["h", "m3"], ["logits"], name="mask")]
    rng = np.random.default_rng(0)
    save(model(nodes, [vi("input_ids", I64, [2, 4]), vi("attention_mask", I64, [2, 4])],
               [vi("logits", F32, [2, 4, 8])],
               [numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32),
                                        "emb"), i64("last", [-1])]),
         out, "masked_lm")
    (np.arange(200) * 7 % 8).astype(np.uint8).tofile(os.path.join(out, "tokens8.bin"))
    np.save(os.path.join(out, "mask_wrong_shape.npy"), np.ones((4, 2), dtype=np.int64))
    np.save(os.path.join(out, "mask_zeros.npy"), np.zeros((2, 4), dtype=np.int64))


# --- what a hostile file can carry: checked before it is trusted -----------

def float_axis(out):
    """Softmax with a FLOAT axis (read as an INT it would silently be 0)."""
    node = helper.make_node("Softmax", ["x"], ["y"], name="soft")
    node.attribute.append(helper.make_attribute("axis", 1.0))
    save(model([node], [vi("x", F32, [2, 3])], [vi("y", F32, [2, 3])]), out, "float_axis")


def int_epsilon(out):
    """LayerNormalization with an INT epsilon (read as a FLOAT it would be 0.0)."""
    node = helper.make_node("LayerNormalization", ["x", "g"], ["y"], name="ln")
    node.attribute.append(helper.make_attribute("epsilon", 1))
    save(model([node], [vi("x", F32, [2, 3])], [vi("y", F32, [2, 3])],
               [numpy_helper.from_array(np.ones(3, np.float32), "g")]), out, "int_epsilon")


def unknown_attribute(out):
    """Relu with an attribute Relu does not have."""
    save(model([helper.make_node("Relu", ["x"], ["y"], name="relu", alpha=0.5)],
               [vi("x", F32, [2])], [vi("y", F32, [2])]), out, "unknown_attribute")


def duplicate_initializer(out):
    """Two initializers named 'w' with different values (the later used to win)."""
    inits = [numpy_helper.from_array(np.ones(2, np.float32), "w"),
             numpy_helper.from_array(np.zeros(2, np.float32), "w")]
    save(model([helper.make_node("Mul", ["x", "w"], ["y"], name="mul")],
               [vi("x", F32, [2])], [vi("y", F32, [2])], inits), out, "duplicate_initializer")


def duplicate_output(out):
    """Two nodes that both define 'h'."""
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="first"),
             helper.make_node("Neg", ["x"], ["h"], name="second"),
             helper.make_node("Abs", ["h"], ["y"], name="abs")]
    save(model(nodes, [vi("x", F32, [2])], [vi("y", F32, [2])]), out, "duplicate_output")


def out_of_order(out):
    """A node reading a value a later node defines."""
    nodes = [helper.make_node("Abs", ["h"], ["y"], name="abs"),
             helper.make_node("Relu", ["x"], ["h"], name="relu")]
    save(model(nodes, [vi("x", F32, [2])], [vi("y", F32, [2])]), out, "out_of_order")


def op_newer_than_opset(out):
    """Opset 1 declared, LayerNormalization (opset 17) used."""
    save(model([helper.make_node("LayerNormalization", ["x", "g"], ["y"], name="ln")],
               [vi("x", F32, [2, 3])], [vi("y", F32, [2, 3])],
               [numpy_helper.from_array(np.ones(3, np.float32), "g")], opset=1),
         out, "op_newer_than_opset")



# --- sizes computed from untrusted dimensions --------------------------------

def range_huge(out):
    """Range 0..1e12 (int64): about 1e12 elements, 8e12 bytes."""
    save(model([helper.make_node("Range", ["start", "limit", "delta"], ["r"], name="range"),
                helper.make_node("Size", ["r"], ["y"], name="size")],
               [], [vi("y", I64, [])],
               [i64("start", 0), i64("limit", 10 ** 12), i64("delta", 1)]),
         out, "range_huge")


def range_beyond(out):
    """Range -2^63..2^63-1 (int64) by 2, whose span wraps an int64, and a
    float Range to infinity."""
    save(model([helper.make_node("Range", ["start", "limit", "delta"], ["r"], name="range"),
                helper.make_node("Size", ["r"], ["y"], name="size")],
               [], [vi("y", I64, [])],
               [i64("start", -2 ** 63), i64("limit", 2 ** 63 - 1), i64("delta", 2)]),
         out, "range_beyond")
    save(model([helper.make_node("Range", ["start", "limit", "delta"], ["r"], name="range"),
                helper.make_node("Size", ["r"], ["y"], name="size")],
               [], [vi("y", I64, [])],
               [f32("start", 0), f32("limit", np.inf), f32("delta", 1)]),
         out, "range_infinite")


def constant_of_shape_huge(out):
    """ConstantOfShape of shape [2^31, 2^31]: 2^62 elements."""
    save(model([helper.make_node("ConstantOfShape", ["shape"], ["c"], name="fill"),
                helper.make_node("Size", ["c"], ["y"], name="size")],
               [], [vi("y", I64, [])], [i64("shape", [2 ** 31, 2 ** 31])]),
         out, "constant_of_shape_huge")


def constant_of_shape_wraps(out):
    """ConstantOfShape of shape [2^62, 4], whose element count wraps to 0."""
    save(model([helper.make_node("ConstantOfShape", ["shape"], ["c"], name="fill"),
                helper.make_node("Size", ["c"], ["y"], name="size")],
               [], [vi("y", I64, [])], [i64("shape", [2 ** 62, 4])]),
         out, "constant_of_shape_wraps")


def expand_huge(out):
    """Expand of a [1] input to [2^32, 2^32]: the product overflows int64."""
    save(model([helper.make_node("Expand", ["x", "shape"], ["y"], name="expand")],
               [vi("x", F32, [1])], [vi("y", F32, [None, None])],
               [i64("shape", [2 ** 32, 2 ** 32])]),
         out, "expand_huge")


def expand_too_big(out):
    """Expand of a [1] input to [2^20, 2^20] f32: 4 TiB, no overflow."""
    save(model([helper.make_node("Expand", ["x", "shape"], ["y"], name="expand")],
               [vi("x", F32, [1])], [vi("y", F32, [None, None])],
               [i64("shape", [2 ** 20, 2 ** 20])]),
         out, "expand_too_big")


def reshape_wraps(out):
    """Reshape of 4 elements to [2^62 + 1, 4], whose count wraps to 4."""
    save(model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")],
               [vi("x", F32, [4])], [vi("y", F32, [None, 4])],
               [i64("shape", [2 ** 62 + 1, 4])]),
         out, "reshape_wraps")


def initializer_overflow(out):
    """An initializer of dims [2^62, 4] with no data: 2^64 elements wrap to 0."""
    t = TensorProto()
    t.name = "w"
    t.data_type = F32
    t.dims.extend([2 ** 62, 4])
    t.raw_data = b""
    save(model([helper.make_node("Relu", ["w"], ["y"], name="relu")],
               [], [vi("y", F32, [2 ** 62, 4])], [t]), out, "initializer_overflow")


def input_overflow(out):
    """A graph input declared [2^62, 4], and one [batch, 2^40] for --dim."""
    save(model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
               [vi("x", F32, [2 ** 62, 4])], [vi("y", F32, [2 ** 62, 4])]),
         out, "input_overflow")
    save(model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
               [vi("x", F32, ["batch", 2 ** 40])], [vi("y", F32, ["batch", 2 ** 40])]),
         out, "input_symbolic_wide")


def huge_npy(out):
    """A .npy header of shape (2^62, 2) with no data, and one of 2^38 x 8 bytes."""
    for name, shape in (("huge.npy", "(4611686018427387904, 2)"),
                        ("too_big.npy", "(274877906944, 1)")):
        header = "{'descr': '<i8', 'fortran_order': False, 'shape': %s, }" % shape
        header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
        with open(os.path.join(out, name), "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") +
                    header.encode())


def expand_host(out):
    """Expand of a [1] input to [2^38] f32: within the IR's 2^40 bytes, but
    twice that in the executor's 8 bytes per element."""
    save(model([helper.make_node("Expand", ["x", "shape"], ["e"], name="expand"),
                helper.make_node("ReduceSum", ["e"], ["y"], name="sum", keepdims=0)],
               [vi("x", F32, [1])], [vi("y", F32, [])], [i64("shape", [2 ** 38])]),
         out, "expand_host")
    np.save(os.path.join(out, "one.npy"), np.ones(1, np.float32))


def host_constants(out):
    """Constants the importer would build in host memory, each within 2^40
    bytes but past --max-fold-elements: a Range of 2^36 elements, a OneHot of
    depth 2^31-1, a Reshape reading a shape of 2^23 elements; and a
    ConstantOfShape of 2^36 elements, a splat that costs one element and
    imports."""
    save(model([helper.make_node("Range", ["start", "limit", "delta"], ["r"], name="range"),
                helper.make_node("ReduceSum", ["r"], ["y"], name="sum", keepdims=0)],
               [], [vi("y", I64, [])],
               [i64("start", 0), i64("limit", 2 ** 36), i64("delta", 1)]),
         out, "range_host")
    save(model([helper.make_node("OneHot", ["i", "depth", "v"], ["y"], name="onehot")],
               [vi("i", I64, [3])], [vi("y", F32, [3, None])],
               [i64("depth", [2 ** 31 - 1]), f32("v", [0, 1])]),
         out, "onehot_host")
    save(model([helper.make_node("ConstantOfShape", ["n"], ["s"], name="ones",
                                 value=helper.make_tensor("v", I64, [1], [1])),
                helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape")],
               [vi("x", F32, [1])], [vi("y", F32, None)], [i64("n", [2 ** 23])]),
         out, "reshape_host")
    save(model([helper.make_node("ConstantOfShape", ["shape"], ["c"], name="fill",
                                 value=helper.make_tensor("v", F32, [1], [2.0])),
                helper.make_node("ReduceSum", ["c"], ["y"], name="sum", keepdims=0)],
               [], [vi("y", F32, [])], [i64("shape", [2 ** 18, 2 ** 18])]),
         out, "fill_splat")


def einsum_ellipsis(out):
    """An einsum term with more letters besides its ellipsis than its rank."""
    save(model([helper.make_node("Einsum", ["x"], ["y"], name="es", equation="abc...->a")],
               [vi("x", F32, [2])], [vi("y", F32, [2])]), out, "einsum_ellipsis")

# --- names that would rewrite the terminal -----------------------------------

FAKE = "\nerror: fake"
RED = "\x1b[31m"


def hostile_names(out):
    """Names with a newline and a fake error line, ANSI colours, and bytes that
    are not UTF-8, in each kind of diagnostic that names something."""
    def one(name, nodes, inputs, outputs, inits=(), opset=17):
        save(model(nodes, inputs, outputs, inits, opset=opset), out, name)

    # An unsupported op: node name and op type.
    one("names_unsupported",
        [helper.make_node(RED + "Evil", ["x"], ["y"], name="n" + FAKE)],
        [vi("x", F32, [2])], [vi("y", F32, [2])])
    # checkGraph: an undefined input, an unknown attribute.
    one("names_dangling",
        [helper.make_node("Relu", ["x" + RED], ["y"], name="relu" + FAKE)],
        [vi("x", F32, [2])], [vi("y", F32, [2])])
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    node.attribute.append(helper.make_attribute("alpha" + FAKE, 0.5))
    one("names_attribute", [node], [vi("x", F32, [2])], [vi("y", F32, [2])])
    # A shape error in an op importer.
    one("names_shapes",
        [helper.make_node("Add", ["x", "z"], ["y"], name="add" + FAKE + RED)],
        [vi("x", F32, [2, 3]), vi("z", F32, [4, 3])], [vi("y", F32, [2, 3])])
    # A graph input with a symbolic dimension; a tensor with a bad raw_data.
    one("names_input", [helper.make_node("Relu", ["x" + FAKE], ["y"], name="relu")],
        [vi("x" + FAKE, F32, ["b" + RED, 4])], [vi("y", F32, ["b" + RED, 4])])
    t = numpy_helper.from_array(np.zeros((2, 2), np.float32), "w" + FAKE)
    t.raw_data = t.raw_data[:10]
    one("names_tensor", [helper.make_node("Add", ["x", "w" + FAKE], ["y"], name="add")],
        [vi("x", F32, [2, 2])], [vi("y", F32, [2, 2])], [t])
    # A size error at a node whose name is not UTF-8.
    m = model([helper.make_node("Expand", ["x", "shape"], ["y"], name="expand")],
              [vi("x", F32, [1])], [vi("y", F32, [None, None])],
              [i64("shape", [2 ** 32, 2 ** 32])])
    # Protobuf writes only UTF-8 strings: the bytes are put in afterwards.
    m.graph.node[0].name = "bad@@utf8"
    data = m.SerializeToString().replace(b"bad@@utf8", b"bad\xff\xfeutf8")
    with open(os.path.join(out, "names_not_utf8.onnx"), "wb") as f:
        f.write(data)
    # A graph output no node produces.
    one("names_output", [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [vi("x", F32, [2])], [vi("y" + FAKE, F32, [2])])
    # An index out of range at run time: the executor's error at the node.
    one("names_gather",
        [helper.make_node("Gather", ["emb", "ids"], ["y"], name="gather" + FAKE + RED)],
        [vi("ids", I64, [3])], [vi("y", F32, [3, 2])],
        [numpy_helper.from_array(np.ones((4, 2), np.float32), "emb")])
    np.save(os.path.join(out, "ids_out_of_range.npy"), np.array([0, 7, 1]))
    # Node and parameter names that would end a comment or a string literal
    # of the generated source (GCC ends a line at '\r' as at '\n').
    nodes = [helper.make_node("Gather", ["emb\r\n", "input_ids"], ["logits"],
                              name="lookup\r#include </etc/passwd>\nint injected = 1; //")]
    rng = np.random.default_rng(0)
    one("names_codegen", nodes, [vi("input_ids", I64, [2, 4])], [vi("logits", F32, [2, 4, 8])],
        [numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "emb\r\n")])
    (np.arange(200) * 7 % 8).astype(np.uint8).tofile(os.path.join(out, "tokens8.bin"))

# --- found by fuzz/onnx-import -----------------------------------------------

def split_no_outputs(out):
    """A Split with no outputs (its even split divided by zero)."""
    nodes = [helper.make_node("Split", ["x"], [], name="split", axis=1),
             helper.make_node("Relu", ["x"], ["y"], name="relu")]
    save(model(nodes, [vi("x", F32, [2, 6])], [vi("y", F32, [2, 6])], opset=13),
         out, "split_no_outputs")


def slice_scalar(out):
    """A Slice of a scalar on axis 0 (indexed past the scalar's no axes)."""
    save(model([helper.make_node("Slice", ["x", "st", "en", "ax"], ["y"], name="slice")],
               [vi("x", F32, [])], [vi("y", F32, [])],
               [i64("st", [0]), i64("en", [1]), i64("ax", [0])]), out, "slice_scalar")


def slice_empty_backward(out):
    """A backward Slice of an empty dimension (clamped its start to [0, -1])."""
    save(model([helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"],
                                 name="slice")],
               [vi("x", F32, [0, 3])], [vi("y", F32, [0, 3])],
               [i64("st", [-1]), i64("en", [-10]), i64("ax", [0]), i64("sp", [-1])]),
         out, "slice_empty_backward")


def duplicate_tied(out):
    """Two initializers 'head', the first the transpose of the gathered table
    (the check for a split tied embedding compared the first's dims, then read
    the second's values past their end)."""
    table = np.arange(6, dtype=np.float32).reshape(2, 3)
    inits = [numpy_helper.from_array(table, "emb"),
             numpy_helper.from_array(table.T.copy(), "head"),
             numpy_helper.from_array(np.zeros(1, np.float32), "head"),
             i64("ids", [1])]
    save(model([helper.make_node("Gather", ["emb", "ids"], ["y"], name="lookup")],
               [], [vi("y", F32, [1, 3])], inits), out, "duplicate_tied")


MODELS = {f.__name__: f for f in [
    argmax_empty_axis,
    float_axis, int_epsilon, unknown_attribute, duplicate_initializer, duplicate_output,
    out_of_order, op_newer_than_opset, split_no_outputs, slice_scalar,
    slice_empty_backward, duplicate_tied,
    range_huge, range_beyond, constant_of_shape_huge, constant_of_shape_wraps, expand_huge, expand_too_big,
    reshape_wraps, initializer_overflow, input_overflow, huge_npy, expand_host,
    host_constants, einsum_ellipsis, hostile_names,
    merged_identity, merged_direct, shared_module, tied_split, training_record, bad_record,
    twice_record, bad_json_record, shared_lookups, tile_overflow, onehot_depth,
    masked_lm,
    reduce_mean_axes_input, reduce_mean_axes_attr, split_num_outputs,
    split_sizes_input, shape_arithmetic, slice_negative_steps, matmul_gemm_einsum,
    loss_ops, external_data_ok, external_constant, external_escape, external_absolute, external_symlink,
    external_short, external_hardlink, external_linked_dir, external_nul, two_unsupported, malformed, raw_data_mismatch, dangling_input,
    wrong_input_count, symbolic_dim, new_opset, legacy_broadcast, softmax_opset11,
    bad_shapes]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="?")
    parser.add_argument("names", nargs="*", help="models to build (default: all)")
    parser.add_argument("--list", action="store_true", help="list the models")
    args = parser.parse_args()
    if args.list:
        for name, f in MODELS.items():
            print(f"{name:24s} {f.__doc__.splitlines()[0] if f.__doc__ else ''}")
        return 0
    if not args.out_dir:
        parser.error("OUT_DIR is required")
    os.makedirs(args.out_dir, exist_ok=True)
    for name in args.names or MODELS:
        if name not in MODELS:
            parser.error(f"unknown model '{name}'")
        MODELS[name](args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
