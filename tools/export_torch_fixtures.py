"""Export small PyTorch nn.RNN models to ONNX as test fixtures: tests/fixtures/.

torch is used only here, never at runtime or in the tests: the exported files are committed.
For each fixture NAME this writes

    tests/fixtures/NAME.onnx         the model, from torch.onnx.export (legacy TorchScript
                                     exporter, dynamo=False, opset 17), IR version capped at 8
    tests/fixtures/NAME.inputs.npz   the input arrays, keyed by ONNX graph input name, in the
                                     dtype the ONNX model declares
    tests/fixtures/NAME.torch.npz    PyTorch's own outputs for those inputs (float32, eval
                                     mode), keyed by ONNX graph output name

and tests/fixtures/manifest.json: NAME -> {"description", "input_flags" (ovc-syntax --input
flags fixing every dynamic input dim to the stored inputs' shape; [] when the inputs are
static), "rnn_nodes" (number of ONNX RNN nodes), "tolerance"}.

Everything is seeded (torch.manual_seed per fixture, numpy default_rng for the inputs), so a
rerun gives the same weights and inputs. Rerun with (needs torch, e.g. torch==2.13.0 CPU):

    pip install torch==2.13.0   # CPU build; only this script needs it
    python tools/export_torch_fixtures.py
"""

from __future__ import annotations

import json
import sys
import tempfile
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import nn

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
OPSET = 17
MAX_IR_VERSION = 8  # onnxruntime 1.31 reads IR <= 13; onnx 1.23 writes 14
TOLERANCE = 1e-4


# ----------------------------------------------------------------------------- models


class RNNAll(nn.Module):
    """forward(x) -> (output, h_n) of one nn.RNN."""

    def __init__(self, **kwargs):
        super().__init__()
        self.rnn = nn.RNN(**kwargs)

    def forward(self, x):
        return self.rnn(x)


class RNNWithH0(nn.Module):
    """forward(x, h0) -> (output, h_n): the initial hidden state is a graph input."""

    def __init__(self, **kwargs):
        super().__init__()
        self.rnn = nn.RNN(**kwargs)

    def forward(self, x, h0):
        return self.rnn(x, h0)


class Classifier(nn.Module):
    """Embedding -> 2-layer RNN (batch_first) -> last time step -> Linear -> Softmax."""

    def __init__(self, vocab: int = 50, dim: int = 16, hidden: int = 24, classes: int = 5):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.RNN(dim, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, classes)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, tokens):
        out, _ = self.rnn(self.embed(tokens))
        return self.softmax(self.head(out[:, -1, :]))


class Recurrent(nn.Module):
    """forward(x, *state) -> (output, h_n[, c_n]) of one nn.GRU/nn.LSTM; the state (h0, or h0 and
    c0 for an LSTM), when given, is a graph input."""

    def __init__(self, kind: type[nn.Module], **kwargs):
        super().__init__()
        self.rnn = kind(**kwargs)

    def forward(self, x, *state):
        if isinstance(self.rnn, nn.LSTM):
            out, (h, c) = self.rnn(x, tuple(state) if state else None)
            return out, h, c
        out, h = self.rnn(x, *state)
        return out, h


class GruClassifier(nn.Module):
    """Embedding -> 2-layer GRU (batch_first) -> last time step -> Linear (logits)."""

    def __init__(self, vocab: int = 40, dim: int = 12, hidden: int = 16, classes: int = 4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.gru = nn.GRU(dim, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, tokens):
        out, _ = self.gru(self.embed(tokens))
        return self.head(out[:, -1, :])


class GruLstmStack(nn.Module):
    """GRU(8, 16) -> LSTM(16, 12), seq-first; the LSTM's output and final states."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 16)
        self.lstm = nn.LSTM(16, 12)

    def forward(self, x):
        out, (h, c) = self.lstm(self.gru(x)[0])
        return out, h, c


# ----------------------------------------------------------------------------- fixtures


@dataclass
class Fixture:
    name: str
    description: str
    make_model: Callable[[], nn.Module]
    make_inputs: Callable[[np.random.Generator], list[np.ndarray]]
    input_names: list[str]
    output_names: list[str]
    dynamic_axes: dict | None = None
    extra: dict = field(default_factory=dict)


def uniform(shape):
    return lambda rng: [rng.uniform(-1.0, 1.0, shape).astype(np.float32)]


FIXTURES = [
    Fixture(
        "rnn_tanh_1layer",
        "1-layer tanh nn.RNN(10, 16), seq-first, static x [7,3,10]; outputs output [7,3,16] and h_n [1,3,16]",
        lambda: RNNAll(input_size=10, hidden_size=16),
        uniform((7, 3, 10)),
        ["x"],
        ["output", "h_n"],
    ),
    Fixture(
        "rnn_relu_2layer_bidir_dynamic",
        "2-layer bidirectional relu nn.RNN(6, 12, batch_first=True) with dynamic batch and sequence "
        "axes on input and outputs; stored x [4,9,6], output [4,9,24], h_n [4,4,12]",
        lambda: RNNAll(input_size=6, hidden_size=12, num_layers=2, nonlinearity="relu", bidirectional=True, batch_first=True),
        uniform((4, 9, 6)),
        ["x"],
        ["output", "h_n"],
        dynamic_axes={"x": {0: "batch", 1: "seq"}, "output": {0: "batch", 1: "seq"}, "h_n": {1: "batch"}},
    ),
    Fixture(
        "rnn_tanh_3layer_nobias",
        "3-layer tanh nn.RNN(8, 20, bias=False), seq-first, static x [5,2,8]; outputs output [5,2,20] and h_n [3,2,20]",
        lambda: RNNAll(input_size=8, hidden_size=20, num_layers=3, bias=False),
        uniform((5, 2, 8)),
        ["x"],
        ["output", "h_n"],
    ),
    Fixture(
        "rnn_embedding_classifier",
        "Embedding(50,16) -> 2-layer tanh nn.RNN(16, 24, batch_first=True) -> last time step -> "
        "Linear(24,5) -> Softmax(-1); static int64 tokens [2,12]; output probs [2,5]",
        Classifier,
        lambda rng: [rng.integers(0, 50, (2, 12)).astype(np.int64)],
        ["tokens"],
        ["probs"],
    ),
    Fixture(
        "rnn_tanh_2layer_h0_input",
        "2-layer tanh nn.RNN(10, 16) with the initial hidden state as a second graph input: "
        "forward(x, h0) = rnn(x, h0); static x [6,3,10], h0 [2,3,16]; outputs output [6,3,16] and h_n [2,3,16]",
        lambda: RNNWithH0(input_size=10, hidden_size=16, num_layers=2),
        lambda rng: [rng.uniform(-1.0, 1.0, (6, 3, 10)).astype(np.float32), rng.uniform(-1.0, 1.0, (2, 3, 16)).astype(np.float32)],
        ["x", "h0"],
        ["output", "h_n"],
    ),
    Fixture(
        "rnn_tanh_long_256",
        "1-layer tanh nn.RNN(8, 16) over a 256-step sequence, seq-first, static x [256,2,8]; outputs output [256,2,16] and h_n [1,2,16]",
        lambda: RNNAll(input_size=8, hidden_size=16),
        uniform((256, 2, 8)),
        ["x"],
        ["output", "h_n"],
    ),
    Fixture(
        "gru_classifier",
        "Embedding(40,12) -> 2-layer nn.GRU(12, 16, batch_first=True) -> last time step -> Linear(16,4); "
        "static int64 tokens [3,10]; output logits [3,4]",
        GruClassifier,
        lambda rng: [rng.integers(0, 40, (3, 10)).astype(np.int64)],
        ["tokens"],
        ["logits"],
    ),
    Fixture(
        "lstm_encoder_h0",
        "1-layer nn.LSTM(10, 16) encoder with the initial states as graph inputs: forward(x, h0, c0) = "
        "lstm(x, (h0, c0)); static x [6,3,10], h0 and c0 [1,3,16]; outputs output [6,3,16], h_n and c_n [1,3,16]",
        lambda: Recurrent(nn.LSTM, input_size=10, hidden_size=16),
        lambda rng: [rng.uniform(-1.0, 1.0, s).astype(np.float32) for s in ((6, 3, 10), (1, 3, 16), (1, 3, 16))],
        ["x", "h0", "c0"],
        ["output", "h_n", "c_n"],
    ),
    Fixture(
        "lstm_bidir_h0c0",
        "2-layer bidirectional nn.LSTM(6, 12) with h0/c0 as graph inputs, seq-first; static x [7,2,6], "
        "h0 and c0 [4,2,12]; outputs output [7,2,24], h_n and c_n [4,2,12]",
        lambda: Recurrent(nn.LSTM, input_size=6, hidden_size=12, num_layers=2, bidirectional=True),
        lambda rng: [rng.uniform(-1.0, 1.0, s).astype(np.float32) for s in ((7, 2, 6), (4, 2, 12), (4, 2, 12))],
        ["x", "h0", "c0"],
        ["output", "h_n", "c_n"],
    ),
    Fixture(
        "gru_lstm_stack",
        "nn.GRU(8, 16) -> nn.LSTM(16, 12), seq-first, static x [5,2,8]; outputs the LSTM's output [5,2,12], h_n and c_n [1,2,12]",
        GruLstmStack,
        uniform((5, 2, 8)),
        ["x"],
        ["output", "h_n", "c_n"],
    ),
    Fixture(
        "lstm_long_256",
        "1-layer nn.LSTM(8, 16) over a 256-step sequence, seq-first, static x [256,2,8]; outputs output [256,2,16], h_n and c_n [1,2,16]",
        lambda: Recurrent(nn.LSTM, input_size=8, hidden_size=16),
        uniform((256, 2, 8)),
        ["x"],
        ["output", "h_n", "c_n"],
    ),
    Fixture(
        "gru_bidir_batch_first",
        "2-layer bidirectional nn.GRU(6, 12, batch_first=True) with dynamic batch and sequence axes on "
        "input and outputs; stored x [4,9,6], output [4,9,24], h_n [4,4,12]",
        lambda: Recurrent(nn.GRU, input_size=6, hidden_size=12, num_layers=2, bidirectional=True, batch_first=True),
        uniform((4, 9, 6)),
        ["x"],
        ["output", "h_n"],
        dynamic_axes={"x": {0: "batch", 1: "seq"}, "output": {0: "batch", 1: "seq"}, "h_n": {1: "batch"}},
    ),
]


# ----------------------------------------------------------------------------- export


RECURRENT_OPS = {"RNN": "RNNCell", "GRU": "GRUCell", "LSTM": "LSTMCell"}
ONNX_TO_NUMPY = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32}


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode())


def export(fx: Fixture) -> dict:
    seed = seed_of(fx.name)
    torch.manual_seed(seed)
    model = fx.make_model().eval()
    inputs = fx.make_inputs(np.random.default_rng(seed))
    args = tuple(torch.from_numpy(a) for a in inputs)

    # cells = steps x layers x directions of each recurrent module, with the steps torch itself saw.
    cells: dict[str, int] = {}

    def count_cells(module, module_args):
        steps = module_args[0].shape[1 if module.batch_first else 0]
        cell = RECURRENT_OPS[{nn.RNN: "RNN", nn.GRU: "GRU", nn.LSTM: "LSTM"}[type(module)]]
        cells[cell] = cells.get(cell, 0) + steps * module.num_layers * (2 if module.bidirectional else 1)

    hooks = [m.register_forward_pre_hook(count_cells) for m in model.modules() if isinstance(m, nn.RNNBase)]
    with torch.no_grad():
        outs = model(*args)
    for hook in hooks:
        hook.remove()
    outs = outs if isinstance(outs, tuple) else (outs,)
    assert len(outs) == len(fx.output_names), (fx.name, len(outs))
    torch_outputs = {n: o.detach().numpy().astype(np.float32) for n, o in zip(fx.output_names, outs)}

    onnx_path = OUT / f"{fx.name}.onnx"
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        # dynamo=False is deliberate: the legacy exporter emits ONNX RNN/GRU/LSTM nodes.
        warnings.filterwarnings("ignore", message="You are using the legacy TorchScript-based ONNX export", category=DeprecationWarning)
        tmp_path = Path(tmp) / "model.onnx"
        torch.onnx.export(
            model,
            args,
            str(tmp_path),
            dynamo=False,
            opset_version=OPSET,
            input_names=fx.input_names,
            output_names=fx.output_names,
            dynamic_axes=fx.dynamic_axes,
        )
        proto = onnx.load(str(tmp_path))
    proto.ir_version = min(proto.ir_version, MAX_IR_VERSION)
    onnx.checker.check_model(proto)
    onnx.save(proto, str(onnx_path))

    nodes = {op: n for op in RECURRENT_OPS if (n := sum(node.op_type == op for node in proto.graph.node))}
    if not nodes:
        raise SystemExit(f"{fx.name}: the exported graph has no RNN/GRU/LSTM node: {[n.op_type for n in proto.graph.node]}")

    initializers = {i.name for i in proto.graph.initializer}
    graph_inputs = [i for i in proto.graph.input if i.name not in initializers]
    if [i.name for i in graph_inputs] != fx.input_names:
        raise SystemExit(f"{fx.name}: ONNX inputs {[i.name for i in graph_inputs]} != {fx.input_names}")
    if [o.name for o in proto.graph.output] != fx.output_names:
        raise SystemExit(f"{fx.name}: ONNX outputs {[o.name for o in proto.graph.output]} != {fx.output_names}")

    stored_inputs, flags = {}, []
    for vi, arr in zip(graph_inputs, inputs):
        ttype = vi.type.tensor_type
        arr = arr.astype(ONNX_TO_NUMPY[ttype.elem_type])
        dims = ttype.shape.dim
        if len(dims) != arr.ndim:
            raise SystemExit(f"{fx.name}: input {vi.name} has rank {len(dims)}, stored array {arr.shape}")
        for d, n in zip(dims, arr.shape):
            if d.HasField("dim_value") and d.dim_value != n:
                raise SystemExit(f"{fx.name}: input {vi.name} declares {dims}, stored array {arr.shape}")
        if any(not d.HasField("dim_value") for d in dims):
            flags.append(f"{vi.name}[{','.join(str(n) for n in arr.shape)}]")
        stored_inputs[vi.name] = arr

    np.savez(OUT / f"{fx.name}.inputs.npz", **stored_inputs)
    np.savez(OUT / f"{fx.name}.torch.npz", **torch_outputs)
    return {"description": fx.description, "input_flags": flags, "nodes": nodes, "cells": cells, "tolerance": TOLERANCE}


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = {}
    for fx in FIXTURES:
        manifest[fx.name] = export(fx)
        entry = manifest[fx.name]
        print(f"wrote {fx.name}: nodes {entry['nodes']}, cells {entry['cells']}, input flags {entry['input_flags']}")
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
