"""Write tests/fixtures/loops/: recurrences as real exporters write them, often as a Loop over time.

Keras models through tf2onnx (run with a Python that has tensorflow-cpu and tf2onnx) and scripted
PyTorch loops through torch.onnx.export(dynamo=False) (a Python with torch). Seeded weights and
inputs, tiny sizes (a few steps, hidden size 4 to 8). For each fixture NAME:

    NAME.onnx        the exporter's file, IR version capped at 8 (onnxruntime reads up to 13)
    NAME.npz         the inputs (keyed by ONNX input name) and the framework's own outputs for
                     them (keyed ``out:`` + ONNX output name), float32

and manifest.json: NAME -> {"description", "exporter", "top_ops" (op counts of the main graph),
"loop_body_ops" (op counts of each Loop/Scan body, in graph order), "input_flags" (--input flags
the test converts with)}. The manifest records what the exporter emitted: tf2onnx writes a plain
LSTM node for an unmasked Keras LSTM and a Loop for everything else here.

tf2onnx numbers some constants from counters that differ from run to run: a rerun writes the same
weights and values under slightly different constant names (and Keras numbers its layers by their
order in the process), so commit only the files a change needs.

    /path/to/venv-tf/bin/python tools/make_loop_fixtures.py keras [NAME...]   # NAMEs: only those files
    /path/to/venv-tf/bin/python tools/make_loop_fixtures.py tf_keras    # also needs tf-keras
    /path/to/venv-torch/bin/python tools/make_loop_fixtures.py torch [NAME...]     # e.g. torch_ligru_scripted
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import onnx

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "loops"
OPSET, IR_VERSION = 17, 8
T, B, F = 5, 2, 3


def _ops(model: onnx.ModelProto) -> tuple[dict, list[dict]]:
    top = Counter(n.op_type for n in model.graph.node)
    bodies = [
        dict(sorted(Counter(x.op_type for x in a.g.node).items()))
        for n in model.graph.node
        for a in n.attribute
        if a.type == onnx.AttributeProto.GRAPH
    ]
    return dict(sorted(top.items())), bodies


ONLY: set[str] = set()  # fixture names given after the part: write only those


def _save(name: str, model: onnx.ModelProto, inputs: dict, outputs: dict, description: str, exporter: str, flags: list[str]) -> None:
    if ONLY and name not in ONLY:
        return
    model.ir_version = min(model.ir_version, IR_VERSION)
    OUT.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(OUT / f"{name}.onnx"))
    arrays = {k: np.asarray(v) for k, v in inputs.items()}
    arrays.update({f"out:{k}": np.asarray(v, np.float32) for k, v in outputs.items()})
    np.savez(OUT / f"{name}.npz", **arrays)
    manifest_path = OUT / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    top, bodies = _ops(model)
    manifest[name] = {"description": description, "exporter": exporter, "top_ops": top, "loop_body_ops": bodies, "input_flags": flags}
    manifest_path.write_text(json.dumps(dict(sorted(manifest.items())), indent=2) + "\n")
    print(name, top, bodies)


# --- Keras through tf2onnx ---------------------------------------------------------------------------


def keras_fixtures() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    import tf2onnx

    keras = tf.keras
    layers = keras.layers
    exporter = f"tensorflow {tf.__version__}, keras {keras.__version__}, tf2onnx {tf2onnx.__version__}, opset {OPSET}"
    rng = np.random.default_rng(26)
    x = rng.standard_normal((B, T, F)).astype(np.float32)
    padded = x.copy()
    padded[0, 3:] = 0.0  # sample 0: 3 real steps then padding (a prefix mask)
    padded[1, 1] = 0.0  # sample 1: a masked step in the middle (not a prefix)
    tokens = np.array([[3, 7, 1, 0, 0], [5, 0, 2, 9, 4]], np.int32)  # 0 is padding, mask_zero=True

    def export(name, build, data, description, seed, flags=()):
        keras.utils.set_random_seed(seed)
        model = build()
        spec = [tf.TensorSpec([None, *data.shape[1:]] if flags else data.shape, tf.as_dtype(data.dtype), name="x")]
        fn = tf.function(lambda v: model(v))  # noqa: PLW0108 (a traced function, not the Keras model itself)
        proto, _ = tf2onnx.convert.from_function(fn, input_signature=spec, opset=OPSET)
        want = model(data)
        outs = want if isinstance(want, (list, tuple)) else [want]
        _save(
            name, proto, {"x": data}, {o.name: np.asarray(v) for o, v in zip(proto.graph.output, outs)}, description, exporter, list(flags)
        )

    seq = lambda *ls, dtype="float32", shape=(T, F): keras.Sequential([keras.Input(shape, batch_size=B, dtype=dtype), *ls])  # noqa: E731
    export("keras_lstm", lambda: seq(layers.LSTM(4)), x, "Keras LSTM(4), last output", 1)
    export("keras_lstm_seq", lambda: seq(layers.LSTM(4, return_sequences=True)), x, "Keras LSTM(4, return_sequences=True)", 2)
    export("keras_gru_reset_after", lambda: seq(layers.GRU(4)), x, "Keras GRU(4) (reset_after=True, the default), last output", 3)
    export(
        "keras_gru_reset_before_seq",
        lambda: seq(layers.GRU(4, reset_after=False, return_sequences=True)),
        x,
        "Keras GRU(4, reset_after=False, return_sequences=True)",
        4,
    )
    export(
        "keras_simplernn_seq", lambda: seq(layers.SimpleRNN(4, return_sequences=True)), x, "Keras SimpleRNN(4, return_sequences=True)", 5
    )
    export(
        "keras_bidirectional_gru",
        lambda: seq(layers.Bidirectional(layers.GRU(4, return_sequences=True))),
        x,
        "Keras Bidirectional(GRU(4, return_sequences=True)), concatenated",
        6,
    )
    export(
        "keras_masking_lstm_seq",
        lambda: seq(layers.Masking(0.0), layers.LSTM(4, return_sequences=True)),
        padded,
        "Keras Masking(0.0) then LSTM(4, return_sequences=True); sample 0 padded after 3 steps, sample 1 has a zero step in the middle",
        7,
    )
    export(
        "keras_masked_lstm_classifier",
        lambda: seq(
            layers.Embedding(10, 6, mask_zero=True), layers.LSTM(8), layers.Dense(3, activation="softmax"), dtype="int32", shape=(T,)
        ),
        tokens,
        "Keras text classifier: Embedding(10, 6, mask_zero=True), LSTM(8), Dense(3, softmax); token 0 is padding (sample 1 has "
        "a 0 mid-sequence)",
        8,
    )
    export(
        "keras_masked_bidirectional_lstm",
        lambda: seq(layers.Embedding(10, 6, mask_zero=True), layers.Bidirectional(layers.LSTM(4)), dtype="int32", shape=(T,)),
        tokens,
        "Keras Embedding(10, 6, mask_zero=True), Bidirectional(LSTM(4)) (the backward pass reads the reversed steps and mask)",
        10,
    )
    export(
        "keras_gru_forecaster",
        lambda: seq(layers.GRU(8, return_sequences=True), layers.GRU(8), layers.Dense(1)),
        x,
        "Keras forecaster: GRU(8, return_sequences=True), GRU(8), Dense(1)",
        9,
    )
    export(
        "keras_gru_dynamic_batch",
        lambda: keras.Sequential([keras.Input((T, F)), layers.GRU(4, return_sequences=True)]),
        x,
        "Keras GRU(4, return_sequences=True) exported with a dynamic batch (initial state Expand(0, [batch, 4]))",
        13,
        ["x[?,5,3]"],
    )


def tf_keras_fixtures() -> None:
    """tf-keras 2 (Keras 2 on TensorFlow 2.21) writes the time loop as a while loop with no trip
    count: the condition ``time < T`` alone decides how many iterations run."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    import tf2onnx
    import tf_keras as keras

    exporter = f"tensorflow {tf.__version__}, tf-keras {keras.__version__}, tf2onnx {tf2onnx.__version__}, opset {OPSET}"
    x = np.random.default_rng(28).standard_normal((B, T, F)).astype(np.float32)
    cases = [
        (
            "tf_keras_gru_reset_before_seq",
            dict(reset_after=False, return_sequences=True),
            "tf-keras 2 GRU(4, reset_after=False, return_sequences=True): a Loop with no trip count",
        ),
        (
            "tf_keras_gru_relu",
            dict(activation="relu", reset_after=False),
            "tf-keras 2 GRU(4, activation='relu', reset_after=False) as RNNoise has it",
        ),
    ]
    for seed, (name, kwargs, description) in enumerate(cases, 12):
        keras.utils.set_random_seed(seed)
        model = keras.Sequential([keras.Input((T, F), batch_size=B), keras.layers.GRU(4, **kwargs)])
        proto, _ = tf2onnx.convert.from_keras(model, input_signature=[tf.TensorSpec(x.shape, tf.float32, name="x")], opset=OPSET)
        _save(name, proto, {"x": x}, {proto.graph.output[0].name: model(x).numpy()}, description, exporter, [])


# --- scripted PyTorch loops ----------------------------------------------------------------------------


def torch_fixtures() -> None:
    import io

    import torch
    from torch import nn

    exporter = f"torch {torch.__version__} torch.jit.script + torch.onnx.export(dynamo=False), opset {OPSET}"

    class LstmCellLoop(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.LSTMCell(F, 4)

        def forward(self, x, h, c):
            outs = []
            for t in range(x.size(0)):
                h, c = self.cell(x[t], (h, c))
                outs.append(h)
            return torch.stack(outs), h, c

    class GruCellLoop(nn.Module):
        """nn.GRUCell's equations written out (torch.onnx cannot export a scripted nn.GRUCell:
        "ONNX symbolic expected node type prim::ListConstruct"), as scripted models write a cell."""

        def __init__(self):
            super().__init__()
            self.ih = nn.Linear(F, 12)
            self.hh = nn.Linear(4, 12)

        def forward(self, x, h):
            outs = []
            for t in range(x.size(0)):
                gi = self.ih(x[t])
                gh = self.hh(h)
                i_r, i_z, i_n = gi.chunk(3, 1)
                h_r, h_z, h_n = gh.chunk(3, 1)
                r = torch.sigmoid(i_r + h_r)
                z = torch.sigmoid(i_z + h_z)
                n = torch.tanh(i_n + r * h_n)
                h = (1 - z) * n + z * h
                outs.append(h)
            return torch.stack(outs), h

    try:  # speechbrain's own, where it imports (it needs a torchaudio that loads); else its code, tools/speechbrain_ligru.py
        from speechbrain.nnet.RNN import LiGRU

        where = "speechbrain.nnet.RNN.LiGRU"
    except Exception:  # noqa: BLE001
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import speechbrain_ligru

        LiGRU = speechbrain_ligru.LiGRU

        where = "speechbrain 1.1.2's LiGRU code (tools/speechbrain_ligru.py)"

    class LiGRUModel(nn.Module):
        """Two LiGRU layers (hidden size 4, batchnorm, relu), batch-first; its batchnorm running
        statistics set away from 0/1 so that they count. Scripted, its time loop is an ONNX Loop
        that reads each step through a no-op Slice then a Gather on axis 1."""

        description = f"torch.jit.script of {where}: 2 layers, hidden 4, batch-first [B, T, F], outputs y and the last h of each layer"

        def __init__(self):
            super().__init__()
            self.ligru = LiGRU(4, (B, T, F), num_layers=2)
            for layer in self.ligru.rnn:
                layer.norm.running_mean.normal_(0, 0.3)
                layer.norm.running_var.uniform_(0.5, 1.5)

        def forward(self, x):
            return self.ligru(x)

    rng = np.random.default_rng(27)
    x = rng.standard_normal((T, B, F)).astype(np.float32)
    h0 = rng.standard_normal((B, 4)).astype(np.float32) * 0.5
    c0 = rng.standard_normal((B, 4)).astype(np.float32) * 0.5
    cases = [
        (
            "torch_lstmcell_loop",
            LstmCellLoop,
            {"x": x, "h0": h0, "c0": c0},
            ["y", "h", "c"],
            "scripted loop over nn.LSTMCell(3, 4), outputs stacked",
        ),
        (
            "torch_grucell_loop",
            GruCellLoop,
            {"x": x, "h0": h0},
            ["y", "h"],
            "scripted loop over a GRU cell written with two nn.Linear (nn.GRUCell's equations)",
        ),
    ]
    cases.append(
        ("torch_ligru_scripted", LiGRUModel, {"x": rng.standard_normal((B, T, F)).astype(np.float32)}, ["y", "h"], LiGRUModel.description)
    )
    for seed, (name, cls, inputs, out_names, description) in enumerate(cases, 11):
        torch.manual_seed(seed)
        module = cls().eval()
        scripted = torch.jit.script(module)
        args = tuple(torch.from_numpy(v) for v in inputs.values())
        with torch.no_grad():
            want = module(*args)
        buffer = io.BytesIO()
        torch.onnx.export(scripted, args, buffer, dynamo=False, opset_version=OPSET, input_names=list(inputs), output_names=out_names)
        proto = onnx.load_from_string(buffer.getvalue())
        _save(name, proto, inputs, {k: v.numpy() for k, v in zip(out_names, want)}, description, exporter, [])


if __name__ == "__main__":
    which = sys.argv[1:2] or ["keras", "tf_keras", "torch"]
    ONLY.update(sys.argv[2:])
    for part in which:
        {"keras": keras_fixtures, "tf_keras": tf_keras_fixtures, "torch": torch_fixtures}[part]()
