"""Did the compiled model keep the integer weights, or fold them back to float?

Plugins decide per consumer: OpenVINO 2026.4's CPU plugin keeps int8 weights that feed a MatMul
(FullyConnected) and folds those of RNNCell/GRUCell/LSTMCell (and sequences) to f32 at compile
time; the NPU compiler turns any integer weight chain into a quantized-weight node. The only
honest answer is the compiled model's own Consts (``get_runtime_model()``), compared with the
integer Consts of the model as read.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..device.plugins import INTEGER_WEIGHTS  # the integer weight types; plugins.py shares them with the compile config

NAMES = {"i8": "int8", "u8": "uint8", "i4": "int4", "u4": "uint4"}


def _consts(model, runtime: bool) -> list[tuple[str, tuple[int, ...]]]:
    """(element type, shape) of the Consts of rank >= 2 (weights, not shape vectors)."""
    out = []
    for op in model.get_ordered_ops():
        kind = op.get_rt_info()["layerType"].astype(str) if runtime and "layerType" in op.get_rt_info() else op.get_type_name()
        if kind not in ("Const", "Constant") or not op.get_output_size():
            continue
        pshape = op.get_output_partial_shape(0)
        if pshape.is_dynamic or len(pshape) < 2:
            continue
        out.append((op.get_output_element_type(0).get_type_name(), tuple(int(d) for d in op.get_output_shape(0))))
    return out


def integer_weight_bytes(consts: list[tuple[str, tuple[int, ...]]]) -> Counter:
    """Values (not bytes: i4 packs two) of integer weights by element type."""
    have: Counter = Counter()
    for etype, shape in consts:
        if etype in INTEGER_WEIGHTS:
            have[etype] += int(np.prod(shape))
    return have


def verdict(model_consts: list[tuple[str, tuple[int, ...]]], runtime_consts: list[tuple[str, tuple[int, ...]]], device: str) -> str:
    """One line for `run`/`inspect`/`validate`: '' when the model has no integer weights.

    kept:   every integer weight value is still an integer Const in the compiled model ("kept int8 on NPU")
    folded: none is: the compiled model holds them as float (the saving is on disk only)
    partly: some are (e.g. MatMul steps kept, cells folded)"""
    wanted = integer_weight_bytes(model_consts)
    if not wanted:
        return ""
    total = sum(wanted.values())
    kept = integer_weight_bytes(runtime_consts)
    kept_total = min(sum(kept.values()), total)
    types = "/".join(sorted(NAMES.get(t, t) for t in (kept or wanted)))  # "kept int8 on NPU", as people say it
    floats = Counter(e for e, s in runtime_consts if e not in INTEGER_WEIGHTS and e not in ("i32", "i64", "boolean"))
    folded_to = floats.most_common(1)[0][0] if floats else "f32"
    if kept_total == 0:
        return f"integer weights folded to {folded_to} on {device}: the saving is on disk only"
    if kept_total >= total:
        return f"integer weights kept {types} on {device}: {total:,} weight values stay compressed in memory"
    share = 100.0 * kept_total / total
    return (
        f"integer weights partly kept on {device}: {share:.0f}% of the {total:,} weight values stay {types}, the rest folded to "
        f"{folded_to} (saved on disk only)"
    )


def compiled_verdict(model, compiled, device: str) -> str:
    """`verdict` for an ov.Model and its ov.CompiledModel."""
    model_consts = _consts(model, runtime=False)
    if not integer_weight_bytes(model_consts):
        return ""
    try:
        runtime = compiled.get_runtime_model()
    except RuntimeError:
        return f"integer weights: {device} does not show its compiled model, so whether it kept them is unknown"
    return verdict(model_consts, _consts(runtime, runtime=True), device)
