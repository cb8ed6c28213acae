"""Reading a stream's model: its inputs as declared and a lone recurrent node's states made graph
inputs/outputs (the outputs' batch axes are read in spec.py, from the model converted at batch 1 and 2)."""

from __future__ import annotations

import os

import numpy as np

from ...errors import UnsupportedFeatureError, UsageError


def read_source(model, pairs):
    """(source, is ONNX, {input: (dtype, dims, initial value or None)}, [output names], pairs)
    with every pair's IN a graph input and OUT a graph output (pairs True: the lone recurrent
    node's own states)."""
    if is_ir_path(model) or not _onnx_like(model):
        from ..engine import read_model

        ir = read_model(model)
        declared = {
            p.get_any_name(): (
                np.dtype(p.get_element_type().to_dtype()),
                [d.get_length() if d.is_static else None for d in p.get_partial_shape()],
                None,
            )
            for p in ir.inputs
        }
        from ..engine import output_names

        outputs = output_names(ir)
        if pairs is True:
            raise UsageError("state=True names a recurrent node's states, which an IR no longer has: give the IR's IN=OUT pairs")
        _check_pairs(pairs, declared, outputs)
        return ir, False, declared, outputs, pairs
    from ...onnx.reading.read import load_model

    proto = load_model(model)
    if pairs is True:
        pairs = _node_pairs(proto)
    proto, initials = _expose_node_states(proto, pairs)
    initializers = {t.name for t in proto.graph.initializer}
    declared = {vi.name: _declared(vi) for vi in proto.graph.input if vi.name not in initializers}
    outputs = [o.name for o in proto.graph.output]
    _check_pairs(pairs, declared, outputs)
    for name, value in initials.items():  # the constant a lone node's initial state had
        declared[name] = (declared[name][0], declared[name][1], value)
    return proto, True, declared, outputs, pairs


def is_ir_path(model) -> bool:
    return isinstance(model, (str, os.PathLike)) and os.fspath(model).endswith(".xml")


def _node_pairs(proto) -> tuple[tuple[str, str], ...]:
    """The lone recurrent node's states as pairs: (initial_h, Y_h), and for LSTM (initial_c, Y_c)."""
    from ...families import family_of

    nodes = [n for n in proto.graph.node if family_of(n) is not None]
    if len(nodes) != 1:
        raise UsageError(
            "state=True carries a lone recurrent node's states, and the model has "
            f"{len(nodes) or 'no'} recurrent node{'s' if len(nodes) != 1 else ''}: give its IN=OUT pairs"
        )
    family = family_of(nodes[0])
    return tuple((family.inputs[slot], family.outputs[1 + k]) for k, slot in enumerate(family.state_slots))


def _onnx_like(model) -> bool:
    import onnx

    return isinstance(model, (onnx.ModelProto, bytes, bytearray)) or (not hasattr(model, "get_parameters") and not _is_ir(model))


def _is_ir(model) -> bool:
    from ...ir.model import IR

    return isinstance(model, IR)


def _declared(vi):
    import onnx

    t = vi.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else (d.dim_param or None) for d in t.shape.dim]
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)), dims, None


def _check_pairs(pairs, inputs, outputs) -> None:
    for name, out in pairs:
        if name not in inputs:
            raise UsageError(f"state pair {name}={out}: '{name}' is not a graph input (inputs: {', '.join(inputs)})")
        if out not in outputs:
            raise UsageError(f"state pair {name}={out}: '{out}' is not a graph output (outputs: {', '.join(outputs)})")


def _expose_node_states(proto, pairs):
    """(model, {input: constant initial value}). A pair whose IN/OUT names a lone recurrent node's own input/output (``initial_h=Y_h``):
    that input becomes graph input IN (starting from the node's constant, else zeros) and that
    output graph output OUT."""
    import onnx

    from ...families import family_of
    from ...onnx.graphs import describe_node

    initializers = {t.name: t for t in proto.graph.initializer}
    inputs = {vi.name for vi in proto.graph.input if vi.name not in initializers}
    outputs = {o.name for o in proto.graph.output}
    wanted = [(i, o) for i, o in pairs if i not in inputs or o not in outputs]
    if not wanted:
        return proto, {}
    nodes = [n for n in proto.graph.node if family_of(n) is not None]
    if len(nodes) != 1:
        name, out = wanted[0]
        where = "no recurrent node" if not nodes else f"{len(nodes)} recurrent nodes"
        raise UsageError(
            f"state pair {name}={out}: '{name}' is not a graph input and the model has "
            f"{where}; name graph inputs and outputs (inputs: {', '.join(sorted(inputs))})"
        )
    node = nodes[0]
    family = family_of(node)
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    direction = attrs.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    label = describe_node(node)
    if direction != "forward":
        raise UnsupportedFeatureError(
            f"{label} is {direction}: a stream carries a forward node's state (the reverse direction reads each chunk back to front)"
        )
    if "hidden_size" not in attrs:
        raise UnsupportedFeatureError(f"{label} has no hidden_size attribute: the state's shape is not known")
    proto = onnx.ModelProto.FromString(proto.SerializeToString())  # the caller's model is left as it was
    node = next(n for n in proto.graph.node if family_of(n) is not None)
    layout = int(attrs.get("layout", 0))
    x = next((vi for vi in proto.graph.input if vi.name == node.input[0]), None)
    batch_dim = None
    if x is not None and len(x.type.tensor_type.shape.dim) == 3:
        d = x.type.tensor_type.shape.dim[0 if layout else 1]
        batch_dim = d.dim_param or (d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None)
    hidden = int(attrs["hidden_size"])
    initials = {}
    for name, out in wanted:
        if name not in inputs:
            if name not in family.inputs or family.slot(name) not in family.state_slots:
                raise UsageError(
                    f"state pair {name}={out}: '{name}' is neither a graph input nor a state "
                    f"input of {label} ({', '.join(family.inputs[s] for s in family.state_slots)})"
                )
            slot = family.slot(name)
            while len(node.input) <= slot:
                node.input.append("")
            feeder = node.input[slot]
            if feeder and feeder not in initializers:
                raise UnsupportedFeatureError(
                    f"state pair {name}={out}: {label}'s {name} is computed inside "
                    f"the model ('{feeder}'); a stream carries the node's own state"
                )
            dims = [batch_dim, 1, hidden] if layout else [1, batch_dim, hidden]
            if feeder:
                value = onnx.numpy_helper.to_array(initializers[feeder])
                if value.shape != (1, 1, hidden):
                    raise UnsupportedFeatureError(
                        f"state pair {name}={out}: {label}'s constant {name} has shape "
                        f"{list(value.shape)}; one stream's state is [1, 1, {hidden}]"
                    )
                initials[name] = value
            node.input[slot] = name
            elem = x.type.tensor_type.elem_type if x is not None else onnx.TensorProto.FLOAT
            proto.graph.input.append(onnx.helper.make_tensor_value_info(name, elem, dims))
        if out not in outputs:
            if out not in family.outputs:
                raise UsageError(
                    f"state pair {name}={out}: '{out}' is neither a graph output nor an output of {label} ({', '.join(family.outputs)})"
                )
            index = family.outputs.index(out)
            while len(node.output) <= index:
                node.output.append("")
            if node.output[index] and node.output[index] != out:
                proto.graph.node.append(onnx.helper.make_node("Identity", [node.output[index]], [out]))
            else:
                node.output[index] = out
            elem = x.type.tensor_type.elem_type if x is not None else onnx.TensorProto.FLOAT
            proto.graph.output.append(onnx.helper.make_tensor_value_info(out, elem, None))
    return proto, initials


_IR = "ovrnn-stream-ir"  # a pickled spec's IR source: (_IR, xml bytes, weights bytes)


def ir_bytes(model) -> tuple:
    """A pickled spec's ov.Model source: its XML and weights."""
    import tempfile
    from pathlib import Path

    from ..engine import ov

    with tempfile.TemporaryDirectory(prefix="ovrnn_spec_") as tmp:
        xml = Path(tmp) / "model.xml"
        ov().serialize(model, str(xml), str(xml.with_suffix(".bin")))
        return _IR, xml.read_bytes(), xml.with_suffix(".bin").read_bytes()


def ir_model(source):
    """A pickled spec's source back: an ov.Model from ``ir_bytes``'s, anything else as it is."""
    if not (isinstance(source, tuple) and source[:1] == (_IR,)):
        return source
    from ..engine import read_ir_bytes

    _, xml, weights = source
    return read_ir_bytes(xml, weights)  # read by the process's one Core, as every IR ovrnn reads
