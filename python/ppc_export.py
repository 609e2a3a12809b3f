"""Export a torch.nn.Module to ONNX the way ppc trains it.

    import sys; sys.path.insert(0, "path/to/ppc/python")
    import ppc_export
    ppc_export.export(model, (input_ids,), "model.onnx",
                      input_names=["input_ids"], output_names=["logits"])

then ``ppc compile model.onnx --mesh ...``. Only torch and onnx are needed.

Why not plain ``torch.onnx.export``: its defaults are made for inference. In eval mode
it merges initializers of equal value (every LayerNorm weight of a fresh model is all
ones, every bias zeros: they become ONE initializer), and constant folding stores a
tied LM head's transposed table as a second initializer. A training compiler given
that file trains a different model. This helper exports in training mode without
constant folding (parameters stay distinct; tied parameters stay one initializer, as
in torch) and records in the file's metadata (key ``ppc.training``, JSON) which
initializers are parameters (``requires_grad``), which are frozen (parameters without
``requires_grad``, and buffers), and which parameter names each tied initializer
stands for. ppc reads the record: frozen initializers are constants.

Mixture of experts: Mixtral's sparse block (transformers' MixtralSparseMoeBlock) loops
over experts with data-dependent shapes (``torch.where`` on the routing mask, Python
lists of token indices), which tracing bakes into the graph from the example input.
During the export this helper replaces its forward by the static form, which computes
the same function: every expert runs over every token, and its output is weighted by
the token's routing weight for that expert (zero unless the expert is among the
token's top k) and summed in expert order, as the sparse loop's ``index_add_`` sums.
The model itself is not changed.

Dropout: ppc does not train with dropout yet, so a training-mode export with a
dropout probability above 0 is refused here (set the probabilities to 0 in the
model's config first).
"""
import json
import os
import tempfile
import types

import numpy
import onnx
from onnx import numpy_helper
import torch

METADATA_KEY = "ppc.training"
_FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
                onnx.TensorProto.BFLOAT16}


class ExportError(ValueError):
    """The model cannot be exported for training with ppc."""


def _parameter_names(model):
    """Every name each parameter tensor is reachable by, tied ones included."""
    names = {}
    for module_name, module in model.named_modules(remove_duplicate=False):
        for leaf, param in module._parameters.items():
            if param is None:
                continue
            full = f"{module_name}.{leaf}" if module_name else leaf
            entry = names.setdefault(id(param), (param, []))
            if full not in entry[1]:
                entry[1].append(full)
    return names


def training_record(proto, model):
    """The ``ppc.training`` record of an exported ``proto`` of ``model``."""
    by_name = {}
    tied = {}
    for param, names in _parameter_names(model).values():
        for name in names:
            by_name[name] = (param, names)
    parameters, frozen = [], []
    for init in proto.graph.initializer:
        if init.data_type not in _FLOAT_TYPES:
            continue
        entry = by_name.get(init.name)
        if entry is None:
            frozen.append(init.name)        # a buffer or a constant the exporter made
            continue
        param, names = entry
        (parameters if param.requires_grad else frozen).append(init.name)
        if len(names) > 1:
            tied[init.name] = names
    return {"format": 1, "parameters": parameters, "frozen": frozen, "tied": tied}


def _dense_mixtral_moe(self, hidden_states):
    """MixtralSparseMoeBlock.forward in static shapes (see the module's docstring)."""
    batch, seq, hidden = hidden_states.shape
    tokens = hidden_states.view(-1, hidden)
    router_logits = self.gate(tokens)
    routing = torch.nn.functional.softmax(router_logits, dim=1, dtype=torch.float)
    weights, selected = torch.topk(routing, self.top_k, dim=-1)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    weights = weights.to(tokens.dtype)
    # [tokens, experts]: each token's weight for each expert, 0 where not routed.
    dense = (torch.nn.functional.one_hot(selected, self.num_experts).to(tokens.dtype)
             * weights.unsqueeze(-1)).sum(dim=1)
    out = torch.zeros_like(tokens)
    for e, expert in enumerate(self.experts):
        out = out + expert(tokens, dense[:, e:e + 1])
    return out.view(batch, seq, hidden), router_logits


# Modules whose forward has data-dependent shapes, by class name, and the static
# form the export uses instead (the same function).
STATIC_FORMS = {"MixtralSparseMoeBlock": _dense_mixtral_moe}


def _check_dropout(proto):
    values = {init.name: init for init in proto.graph.initializer}
    for node in proto.graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    values[node.output[0]] = attr.t
                elif attr.name == "value_float":
                    values[node.output[0]] = numpy_helper.from_array(
                        numpy.array(attr.f, dtype=numpy.float32))
    for node in proto.graph.node:
        if node.op_type != "Dropout" or len(node.input) < 2 or not node.input[1]:
            continue
        ratio = values.get(node.input[1])
        if ratio is not None and float(numpy_helper.to_array(ratio)) > 0:
            raise ExportError(
                f"node {node.name!r}: dropout with ratio "
                f"{float(numpy_helper.to_array(ratio))} in training mode; ppc does "
                "not train with dropout yet: set the model's dropout probabilities to 0 "
                "(e.g. in its config) before exporting")


def export(model, args, path, *, input_names=None, output_names=None, dynamic_axes=None,
           opset_version=17, **kwargs):
    """Exports ``model`` called on ``args`` to ``path`` for training with ppc.

    Takes torch.onnx.export's arguments, except ``training`` and
    ``do_constant_folding``, which it sets. Returns the ``ppc.training`` record.
    """
    for fixed in ("training", "do_constant_folding", "export_params",
                  "keep_initializers_as_inputs"):
        if fixed in kwargs:
            raise ExportError(f"{fixed}= is set by ppc_export.export")
    was_training = model.training
    patched = [m for m in model.modules() if type(m).__name__ in STATIC_FORMS]
    # A forward the instance already has (a hook, another patch) is put back.
    saved = [(m, m.__dict__["forward"]) for m in patched if "forward" in m.__dict__]
    for module in patched:
        module.forward = types.MethodType(STATIC_FORMS[type(module).__name__], module)
    # Written beside `path` and renamed when complete, so a refused export leaves
    # whatever was at `path` untouched.
    handle, scratch = tempfile.mkstemp(suffix=".onnx", dir=os.path.dirname(os.path.abspath(path)))
    os.close(handle)
    try:
        _export(model, args, scratch, input_names, output_names, dynamic_axes,
                opset_version, kwargs)
        proto = onnx.load(scratch, load_external_data=False)
        _check_dropout(proto)
        record = training_record(proto, model)
        for prop in list(proto.metadata_props):
            if prop.key == METADATA_KEY:
                proto.metadata_props.remove(prop)
        proto.metadata_props.add(key=METADATA_KEY, value=json.dumps(record))
        onnx.save(proto, scratch)
        os.replace(scratch, path)
    finally:
        if os.path.exists(scratch):
            os.remove(scratch)
        model.train(was_training)
        for module in patched:
            del module.forward      # back to the class's own forward
        for module, forward in saved:
            module.forward = forward
    return record


def _export(model, args, path, input_names, output_names, dynamic_axes, opset_version,
            kwargs):
    torch.onnx.export(model, args, path, input_names=input_names,
                      output_names=output_names, dynamic_axes=dynamic_axes,
                      opset_version=opset_version,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, export_params=True,
                      keep_initializers_as_inputs=False, **kwargs)
