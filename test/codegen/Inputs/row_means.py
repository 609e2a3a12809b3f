"""Writes a small ONNX model whose program has a reduction over each row of an
elementwise group (the mean of squares of an embedding, scaling it), with
no square root after it, so that no fused op takes it: the CPU target's
threads then share the rows (emit-cpp.test). input_ids [2, 128] ->
logits [2, 128, 256]."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
emb = numpy_helper.from_array((0.02 * rng.standard_normal((256, 256))).astype(np.float32), "emb")
head = numpy_helper.from_array((0.02 * rng.standard_normal((256, 256))).astype(np.float32), "head")
axes = numpy_helper.from_array(np.array([-1], dtype=np.int64), "axes")
nodes = [
    helper.make_node("Gather", ["emb", "input_ids"], ["h"], name="/embed/Gather"),
    helper.make_node("Mul", ["h", "h"], ["sq"], name="/scale/Mul"),
    helper.make_node("ReduceMean", ["sq", "axes"], ["ms"], name="/scale/ReduceMean", keepdims=1),
    helper.make_node("Mul", ["h", "ms"], ["scaled"], name="/scale/Mul_1"),
    helper.make_node("MatMul", ["scaled", "head"], ["logits"], name="/head/MatMul"),
]
graph = helper.make_graph(
    nodes, "row_means",
    [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [2, 128])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 128, 256])],
    [emb, head, axes])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), sys.argv[1])
