"""The per-node error budget of `--compress-weights`: measured at convert time, on the float64 reference.

    error(node, scheme) = max over outputs (Y, and Y_c for LSTM) and steps of
        | reference(W', R') - reference(W, R) | / max(1, max | reference(W, R) |)
                                                      W', R' = the dequantized weights

(absolute for outputs within [-1, 1], relative for unbounded activations such as Relu),

over max(T, 256) steps, batch 1 (or the constant initial states' batch), X ~ U(-1, 1) seeded, the
node's own B, P, initial states (when constant) and attributes (a runtime W or R: a seeded
stand-in in U(±1/√H)). Quantization error feeds back
through every step, so a long run shows drift that a short one hides. A node whose int4 error is
above the budget is kept at int8, and one whose int8 error is above it keeps float weights, with a
note naming the figures.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import reference
from ..quantization import Compression, quantize

MIN_STEPS = 256


def reference_inputs(spec, steps: int, seed: int = 0) -> tuple[list, dict]:
    """(ONNX inputs, attributes) for reference.run_node: the node's constants, random X."""
    value = lambda t: None if t is None or not t.is_constant else np.asarray(t.value, dtype=np.float64)  # noqa: E731
    h0 = value(spec.initial_h)
    c0 = value(getattr(spec, "initial_c", None))
    batch = h0.shape[1] if h0 is not None else (c0.shape[1] if c0 is not None else 1)
    if spec.layout and h0 is not None:  # [B, D, H] -> [D, B, H]
        h0 = h0.transpose(1, 0, 2)
        batch = h0.shape[1]
    if spec.layout and c0 is not None:
        c0 = c0.transpose(1, 0, 2)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (steps, batch, spec.input_size))
    k = 1 / np.sqrt(spec.hidden_size)  # a runtime W/R: a stand-in in PyTorch's init range
    stand_in = lambda t: value(t) if t.is_constant else rng.uniform(-k, k, tuple(d.value for d in t.shape))  # noqa: E731
    given = {
        "X": x,
        "W": stand_in(spec.W),
        "R": stand_in(spec.R),
        "B": value(spec.B),
        "sequence_lens": None,
        "initial_h": h0,
        "initial_c": c0,
    }
    inputs = [given[name] if name in given else value(getattr(spec, name)) for name in spec.family.inputs]  # in slot order (LSTM: and P)
    flat = [a for direction in spec.activations for a in (direction if isinstance(direction, tuple) else (direction,))]
    attrs: dict[str, object] = {
        "hidden_size": spec.hidden_size,
        "direction": "bidirectional" if spec.num_directions == 2 else spec.directions[0].name.lower(),
        "activations": [a.name for a in flat],
        "activation_alpha": [a.alpha for a in flat if a.alpha is not None],
        "activation_beta": [a.beta for a in flat if a.beta is not None],
    }
    if spec.clip is not None:
        attrs["clip"] = spec.clip
    for switch in ("input_forget", "linear_before_reset"):  # the families' own switches (LSTM, GRU)
        if getattr(spec, switch, False):
            attrs[switch] = 1
    return inputs, attrs


def float_run(spec, steps: int) -> tuple[list, dict, list]:
    """(inputs, attributes, outputs) of the node's float64 reference over `steps` seeded steps: the
    baseline every scheme tried is measured against."""
    inputs, attrs = reference_inputs(spec, steps)
    return inputs, attrs, reference.run_node(spec.family.name, inputs, attrs)


def weight_error(spec, compression: Compression, baseline: tuple[list, dict, list]) -> float:
    """max |Δ| of the outputs for `compression` of the node's constant W and R, against `baseline`
    (float_run)."""
    inputs, attrs, original = baseline
    changed = list(inputs)
    for slot, tensor in ((spec.family.slot("W"), spec.W), (spec.family.slot("R"), spec.R)):
        if tensor.is_constant:
            changed[slot] = np.stack([quantize(m, compression).dequantize() for m in inputs[slot]])
    quantized = reference.run_node(spec.family.name, changed, attrs)
    outputs = tuple(k for k, name in enumerate(spec.family.outputs) if name in ("Y", "Y_c"))  # Y (every H) and Y_c
    # absolute where outputs stay within [-1, 1] (sigmoid/tanh), relative to their size beyond
    return max(float(np.abs(quantized[k] - original[k]).max() / max(1.0, np.abs(original[k]).max())) for k in outputs)


def choose(spec, compression: Compression, who: str) -> tuple[Compression | None, float | None, list[str]]:
    """The scheme this node gets within `compression.max_error`: int4 -> int8 -> float (None);
    -> (scheme, its measured error, notes)."""
    notes: list[str] = []
    steps = max(spec.seq_length, MIN_STEPS)
    baseline = float_run(spec, steps)  # once: the same float run for every scheme tried
    tried = compression
    while tried is not None:
        error = weight_error(spec, tried, baseline)
        if error <= tried.max_error:
            return tried, error, notes
        fallback = replace(tried, mode="int8", group_size=-1) if tried.mode == "int4" else None
        then = "kept at int8" if fallback is not None else "its weights stay float"
        notes.append(
            f"{who}: {tried.mode} quantization-only error {error:.2e} over {steps} steps is above --max-weight-error "
            f"{tried.max_error:g}: {then}"
        )
        tried = fallback
    return None, None, notes
