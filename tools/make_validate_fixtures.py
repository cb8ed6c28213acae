"""Write tests/fixtures/validate/*.onnx: the models that crashed or misjudged ``validate``'s float64
reference (issue 30), small, made by the real exporters (tests/validation/test_validate_whole_models.py).

* ``doctr_crnn_mobilenet_v3_small.torchscript.onnx`` / ``.dynamo.onnx``: docTR's
  ``crnn_mobilenet_v3_small`` (python-doctr's own ``_crnn`` and ``mobilenet_v3_small_r`` backbone,
  untrained: ``pretrained=False``), narrowed to fit a fixture (backbone ``width_mult`` 0.25, 16 LSTM
  units, a 10-digit vocabulary, 32x64 images), exported with docTR's ``export_model_to_onnx``
  (torch.onnx, ``dynamo=False``) and with ``torch.onnx.export(dynamo=True)``. Both hold HardSwish,
  which onnx.reference computes through its schema's function body: its loader hands back a factory,
  not a class, and validate's guard subclassed it (``TypeError: metaclass conflict``).
* ``paddleocr_crnn.opset11.onnx`` / ``.opset14.onnx``: a PaddleOCR-style CRNN written with
  paddlepaddle's layers after PaddleOCR's ``rec_mv3_none_bilstm_ctc`` (MobileNetV3 blocks with
  hardswish and squeeze-excite, Im2Seq, a 2-layer bidirectional LSTM, the CTC head's softmax; not
  PaddleOCR's own code, which is not installed), exported by the real paddle2onnx at the opsets
  PaddleOCR's docs use. paddle2onnx writes BatchNormalization with ``momentum``, which onnx.reference
  1.23 reads as training mode (opset 11: a false FAIL), and HardSwish from opset 14 (the crash).
* ``lstm_energy_0d.onnx``: an LSTM whose second output is a 0-d ReduceSum (``keepdims=0``) of Y_h
  (``'numpy.float64' object does not support item assignment`` in the comparison).
* ``lstm_lm_fp16_keep_io.onnx``: a 2-layer LSTM language model (Embedding, LSTM, Linear) exported by
  torch.onnx (``dynamo=False``) and converted by onnxconverter-common's
  ``convert_float_to_float16(keep_io_types=True)``: float16 weights behind int64 tokens and float32
  logits (it FAILed at float32 tolerance).

Every file's IR version is capped at 10 (onnxruntime reads up to 13). Rerun with torch==2.13.0 (CPU),
python-doctr, onnxscript, paddlepaddle, paddle2onnx and onnxconverter-common installed (the doctr
and paddle groups may be left out: name the groups to make, e.g. ``doctr paddle``):

    python tools/make_validate_fixtures.py [doctr] [paddle] [zero_d] [fp16_lm]
"""

from __future__ import annotations

import json
import sys
import tempfile
import types
import warnings
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "validate"
MAX_IR_VERSION = 10


def _save(model: onnx.ModelProto, name: str, made_by: str, manifest: dict) -> None:
    model.ir_version = min(model.ir_version, MAX_IR_VERSION)
    onnx.checker.check_model(model)
    path = OUT / name
    onnx.save(model, path)
    manifest[name] = {
        "made_by": made_by,
        "opsets": {o.domain or "ai.onnx": o.version for o in model.opset_import},
        "ops": sorted({n.op_type for n in model.graph.node}),
        "bytes": path.stat().st_size,
    }
    print(f"{name}: {path.stat().st_size:,} bytes, {manifest[name]['ops']}")


def doctr(manifest: dict) -> None:
    """docTR's CRNN with a MobileNetV3-small backbone, both torch.onnx exporters."""
    # torchvision's wheels on PyPI are CUDA builds whose C++ ops do not load beside a CPU torch;
    # docTR needs only torchvision's Python models: skip its op registrations.
    for module in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
        sys.modules.setdefault(module, types.ModuleType(module))
    import functools

    import doctr as doctr_package
    import torch
    from doctr.models.classification.mobilenet.pytorch import mobilenet_v3_small_r
    from doctr.models.recognition.crnn.pytorch import _crnn
    from doctr.models.utils import export_model_to_onnx

    torch.manual_seed(0)
    backbone = functools.partial(mobilenet_v3_small_r, width_mult=0.25)
    model = _crnn(
        "crnn_mobilenet_v3_small",
        False,
        backbone,
        pretrained_backbone=False,
        vocab="0123456789",
        rnn_units=16,
        input_shape=(3, 32, 64),
        exportable=True,
    ).eval()
    with torch.no_grad():  # untrained BatchNorm statistics (0, 1) would make every norm an identity
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    x = torch.rand(1, 3, 32, 64)
    versions = f"python-doctr {doctr_package.__version__}, torch {torch.__version__}"
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = export_model_to_onnx(model, str(Path(tmp) / "crnn"), x)  # docTR's own: dynamo=False, dynamic batch
        _save(
            onnx.load(path),
            "doctr_crnn_mobilenet_v3_small.torchscript.onnx",
            f"docTR export_model_to_onnx (torch.onnx dynamo=False), {versions}",
            manifest,
        )
        batch = torch.export.Dim("batch", min=1, max=64)
        torch.onnx.export(
            model,
            (x,),
            Path(tmp) / "dynamo.onnx",
            input_names=["input"],
            output_names=["logits"],
            dynamo=True,
            dynamic_shapes={"x": {0: batch}},
        )
        exported = onnx.load(Path(tmp) / "dynamo.onnx")
        _save(exported, "doctr_crnn_mobilenet_v3_small.dynamo.onnx", f"torch.onnx.export(dynamo=True), {versions}", manifest)


def paddle(manifest: dict) -> None:
    """A PaddleOCR-style CRNN (rec_mv3_none_bilstm_ctc) in paddlepaddle, through paddle2onnx."""
    import paddle as pd
    import paddle.nn.functional as F
    import paddle2onnx
    from paddle import nn

    class ConvBN(nn.Layer):
        def __init__(self, cin, cout, k, stride, groups=1, act=None):
            super().__init__()
            self.conv = nn.Conv2D(cin, cout, k, stride, padding=(k - 1) // 2, groups=groups, bias_attr=False)
            self.bn = nn.BatchNorm2D(cout)
            self.act = act

        def forward(self, x):
            x = self.bn(self.conv(x))
            return F.hardswish(x) if self.act == "hardswish" else F.relu(x) if self.act == "relu" else x

    class SE(nn.Layer):  # PaddleOCR's SEModule: hardsigmoid(slope 0.2, offset 0.5)
        def __init__(self, c, r=4):
            super().__init__()
            self.pool, self.c1, self.c2 = nn.AdaptiveAvgPool2D(1), nn.Conv2D(c, c // r, 1), nn.Conv2D(c // r, c, 1)

        def forward(self, x):
            return x * F.hardsigmoid(self.c2(F.relu(self.c1(self.pool(x)))), slope=0.2, offset=0.5)

    class Block(nn.Layer):  # PaddleOCR's ResidualUnit
        def __init__(self, cin, mid, cout, k, stride, se, act):
            super().__init__()
            self.expand, self.dw = ConvBN(cin, mid, 1, 1, act=act), ConvBN(mid, mid, k, stride, groups=mid, act=act)
            self.se, self.proj = (SE(mid) if se else None), ConvBN(mid, cout, 1, 1)
            self.res = cin == cout and stride == 1

        def forward(self, x):
            y = self.dw(self.expand(x))
            y = self.proj(self.se(y) if self.se is not None else y)
            return x + y if self.res else y

    class CRNN(nn.Layer):
        def __init__(self, classes=11, hidden=16):
            super().__init__()
            self.stem = ConvBN(3, 8, 3, 2, act="hardswish")
            self.blocks = nn.Sequential(
                Block(8, 8, 8, 3, (2, 1), True, "relu"),
                Block(8, 24, 12, 3, (2, 1), False, "relu"),
                Block(12, 32, 12, 5, 1, True, "hardswish"),
                Block(12, 32, 16, 5, (2, 1), True, "hardswish"),
            )
            self.last, self.pool = ConvBN(16, 32, 1, 1, act="hardswish"), nn.MaxPool2D(kernel_size=2, stride=2)
            self.rnn = nn.LSTM(32, hidden, direction="bidirectional", num_layers=2)  # EncoderWithRNN
            self.fc = nn.Linear(2 * hidden, classes)  # CTCHead

        def forward(self, x):
            x = self.pool(self.last(self.blocks(self.stem(x))))
            x = x.squeeze(axis=2).transpose([0, 2, 1])  # Im2Seq
            x, _ = self.rnn(x)
            return F.softmax(self.fc(x), axis=2)  # the CTC head's softmax at inference

    pd.seed(0)
    model = CRNN()
    for layer in model.sublayers():
        if isinstance(layer, nn.BatchNorm2D):  # trained-looking statistics
            layer._mean.set_value(np.random.default_rng(1).uniform(-0.1, 0.1, layer._mean.shape).astype(np.float32))
            layer._variance.set_value(np.random.default_rng(2).uniform(0.5, 1.5, layer._variance.shape).astype(np.float32))
    model.eval()
    versions = f"paddlepaddle {pd.__version__}, paddle2onnx {paddle2onnx.__version__}"
    with tempfile.TemporaryDirectory() as tmp:
        static = pd.jit.to_static(model, input_spec=[pd.static.InputSpec([None, 3, 32, 64], "float32", "x")], full_graph=True)
        pd.jit.save(static, f"{tmp}/inference")
        program = next(p for p in Path(tmp).iterdir() if p.suffix in (".json", ".pdmodel"))
        for opset in (11, 14):
            out = Path(tmp) / f"crnn{opset}.onnx"
            paddle2onnx.export(str(program), f"{tmp}/inference.pdiparams", str(out), opset_version=opset)
            _save(
                onnx.load(out),
                f"paddleocr_crnn.opset{opset}.onnx",
                f"paddle2onnx opset {opset}, {versions} (PaddleOCR-style rec_mv3_none_bilstm_ctc written in paddle)",
                manifest,
            )


def zero_d(manifest: dict) -> None:
    """An LSTM with a 0-d output: energy = sum of Y_h (ReduceSum, keepdims=0)."""
    rng = np.random.default_rng(0)
    H, I = 4, 3
    inits = [
        numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)
        for name, shape in (("W", (1, 4 * H, I)), ("R", (1, 4 * H, H)), ("B", (1, 8 * H)))
    ]
    nodes = [
        helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y", "Y_h"], hidden_size=H),
        helper.make_node("ReduceSum", ["Y_h"], ["energy"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "lstm_energy_0d",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [5, "batch", I])],
        [
            helper.make_tensor_value_info("energy", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, [5, 1, "batch", H]),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="tools/make_validate_fixtures.py")
    _save(model, "lstm_energy_0d.onnx", "onnx.helper", manifest)


def fp16_lm(manifest: dict) -> None:
    """A float32 LSTM LM from torch, converted to float16 weights with keep_io_types=True."""
    import onnxconverter_common
    import torch
    from onnxconverter_common import float16
    from torch import nn

    class LM(nn.Module):
        def __init__(self, vocab=40, emb=16, hidden=24):
            super().__init__()
            self.emb, self.lstm, self.head = (
                nn.Embedding(vocab, emb),
                nn.LSTM(emb, hidden, num_layers=2, batch_first=True),
                nn.Linear(hidden, vocab),
            )

        def forward(self, tokens):
            y, _ = self.lstm(self.emb(tokens))
            return self.head(y)

    torch.manual_seed(0)
    tokens = torch.randint(0, 40, (1, 12))
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = Path(tmp) / "lm.onnx"
        torch.onnx.export(
            LM().eval(),
            (tokens,),
            path,
            input_names=["tokens"],
            output_names=["logits"],
            dynamic_axes={"tokens": {0: "batch"}, "logits": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
        half = float16.convert_float_to_float16(onnx.load(path), keep_io_types=True)
    made_by = (
        f"torch.onnx (dynamo=False) {torch.__version__}, onnxconverter-common {onnxconverter_common.__version__} "
        "convert_float_to_float16(keep_io_types=True)"
    )
    _save(half, "lstm_lm_fp16_keep_io.onnx", made_by, manifest)


GROUPS = {"doctr": doctr, "paddle": paddle, "zero_d": zero_d, "fp16_lm": fp16_lm}


def main(argv: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    manifest_path = OUT / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for name in argv or list(GROUPS):
        GROUPS[name](manifest)
    manifest_path.write_text(json.dumps(dict(sorted(manifest.items())), indent=2) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
