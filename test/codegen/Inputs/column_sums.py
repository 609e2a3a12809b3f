"""Writes a small ONNX model whose backward sums an elementwise group over its
rows into columns (the gradient of a per-feature scale: the sum over the
tokens of dy * h), which no fused op takes: the CPU target keeps the rows'
loop on one thread and vectorises the columns' (emit-cpp.test).
input_ids [2, 128] -> logits [2, 128, 256]."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
emb = numpy_helper.from_array((0.02 * rng.standard_normal((256, 256))).astype(np.float32), "emb")
scale = numpy_helper.from_array((1 + 0.1 * rng.standard_normal(256)).astype(np.float32), "scale")
head = numpy_helper.from_array((0.02 * rng.standard_normal((256, 256))).astype(np.float32), "head")
nodes = [
    helper.make_node("Gather", ["emb", "input_ids"], ["h"], name="/embed/Gather"),
    helper.make_node("Mul", ["h", "scale"], ["scaled"], name="/scale/Mul"),
    helper.make_node("MatMul", ["scaled", "head"], ["logits"], name="/head/MatMul"),
]
graph = helper.make_graph(
    nodes, "column_sums",
    [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [2, 128])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 128, 256])],
    [emb, scale, head])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), sys.argv[1])
