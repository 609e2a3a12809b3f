"""Writes a small ONNX model with a softmax over the middle axis of a tensor
whose last dimension is 1 (attention pooling's weights over the tokens,
[2, 128, 1] along axis 1): inner is 1 there without the axis being last,
and the kernel's rows are 128 apart, not 1 (emit-cpp.test). input_ids
[2, 128] -> logits [2, 128, 256]."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
emb = numpy_helper.from_array((0.02 * rng.standard_normal((256, 64))).astype(np.float32), "emb")
score = numpy_helper.from_array((0.02 * rng.standard_normal((64, 1))).astype(np.float32), "score")
head = numpy_helper.from_array((0.02 * rng.standard_normal((64, 256))).astype(np.float32), "head")
nodes = [
    helper.make_node("Gather", ["emb", "input_ids"], ["h"], name="/embed/Gather"),
    helper.make_node("MatMul", ["h", "score"], ["s"], name="/pool/MatMul"),
    helper.make_node("Softmax", ["s"], ["p"], name="/pool/Softmax", axis=1),
    helper.make_node("Mul", ["h", "p"], ["weighted"], name="/pool/Mul"),
    helper.make_node("MatMul", ["weighted", "head"], ["logits"], name="/head/MatMul"),
]
graph = helper.make_graph(
    nodes, "column_softmax",
    [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [2, 128])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 128, 256])],
    [emb, score, head])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), sys.argv[1])
