"""Write tests/fixtures/qa/*.onnx: small PyTorch exports of real architectures that a QA pass found
ovrnn getting wrong (tests/end_to_end/test_qa_models.py runs them through convert and validate).

torch is used only here, never at runtime or in the tests: the exported files are committed.

* ``greedy_gru_decoder``: a seq2seq GRU encoder-decoder whose greedy decode is a scripted
  ``for i in range(max_len)`` loop (torch.jit.script, TorchScript exporter): a ``Loop`` with a
  runtime trip count carries the token (ArgMax of the last logits, ``[B, 1]``), the hidden state and
  the growing output; the decoder GRU inside reads the token's embedding, one step per iteration.
  TorchScript declares the carried token ``[?, ?]``, so only a fixed point over the loop shows that
  its length is 1 on every iteration.
* ``half_rnn_batch_first``: ``nn.RNN(batch_first=True)`` + ``nn.Linear`` exported with ``.half()``
  weights: the fp16 ``Transpose -> MatMul`` of the head crashes onnxruntime 1.32 (segfault) at its
  default optimization level.
* ``cached_conv_lstm_encoder``: a streaming encoder in the style of sherpa-onnx/k2 exports, static
  shapes: a causal Conv1d whose left context comes in as ``cache`` and goes out as ``new_cache``,
  then a 2-layer LSTM whose state comes in as ``h``/``c`` and goes out as ``hn``/``cn``; streamed
  with ``--stateful cache=new_cache,h=hn,c=cn`` (no state has a batch axis ovrnn can name).

* ``feature_check_gru``: a scripted ``if x.shape[2] == 3`` around a 2-layer GRU (else: the first 3
  features), exported with dynamic time and batch: the If tests a static dim of a shape whose
  batch stays dynamic.

Rerun with (needs torch, e.g. torch==2.13.0 CPU; IR version capped at 8 for onnxruntime):

    python tools/make_qa_fixtures.py
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import onnx
import torch
from torch import nn

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "qa"
OPSET = 17
MAX_IR_VERSION = 8


class GreedyGRUDecoder(nn.Module):
    """forward(src [B, S] int64, max_len) -> logits [B, max_len, V]."""

    def __init__(self, vocab_in: int = 7, vocab_out: int = 5, hidden: int = 6):
        super().__init__()
        self.emb_in = nn.Embedding(vocab_in, 4)
        self.encoder = nn.GRU(4, hidden, batch_first=True)
        self.emb_out = nn.Embedding(vocab_out, 4)
        self.decoder = nn.GRU(4, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab_out)

    def forward(self, src: torch.Tensor, max_len: int) -> torch.Tensor:
        _, h = self.encoder(self.emb_in(src))
        tok = torch.zeros(src.shape[0], 1, dtype=torch.long)
        outs = torch.zeros(src.shape[0], 0, self.out.out_features)
        for step in range(max_len):  # noqa: B007 (TorchScript needs a typed loop variable)
            y, h = self.decoder(self.emb_out(tok), h)
            logits = self.out(y)
            tok = logits.argmax(-1)
            outs = torch.cat([outs, logits], 1)
        return outs


class RNNHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(3, 4, batch_first=True)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y)


class CachedConvLSTMEncoder(nn.Module):
    """forward(x [T, B, F], cache [B, F, 2], h, c [2, B, H]) -> (y, new_cache, hn, cn)."""

    def __init__(self, feat: int = 3, channels: int = 4, hidden: int = 4):
        super().__init__()
        self.conv = nn.Conv1d(feat, channels, 3)
        self.lstm = nn.LSTM(channels, hidden, num_layers=2)
        self.proj = nn.Linear(hidden, 2)

    def forward(self, x, cache, h, c):
        xt = torch.cat([cache, x.permute(1, 2, 0)], dim=2)
        new_cache = xt[:, :, -2:]
        y = torch.relu(self.conv(xt)).permute(2, 0, 1)
        y, (hn, cn) = self.lstm(y, (h, c))
        return self.proj(y), new_cache, hn, cn


class FeatureCheckGRU(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(3, 4, num_layers=2)

    def forward(self, x):
        if x.shape[2] == 3:
            y, h = self.gru(x)
        else:
            y, h = self.gru(x[:, :, :3])
        return y, h


def export(model, args, name, input_names, output_names, dynamic_axes):
    path = OUT / f"{name}.onnx"
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tmp_path = Path(tmp) / "model.onnx"
        torch.onnx.export(
            model,
            args,
            str(tmp_path),
            input_names=input_names,
            output_names=output_names,
            dynamic_axes=dynamic_axes,
            opset_version=OPSET,
            dynamo=False,
        )
        proto = onnx.load(tmp_path)
    proto.ir_version = min(proto.ir_version, MAX_IR_VERSION)
    proto.producer_version = ""  # the file does not change with the torch build
    path.write_bytes(proto.SerializeToString())
    print(f"wrote {path.relative_to(OUT.parent.parent.parent)}")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    decoder = torch.jit.script(GreedyGRUDecoder().eval())
    export(decoder, (torch.randint(0, 7, (2, 4)), 3), "greedy_gru_decoder", ["src", "max_len"], ["logits"], {"src": {0: "B", 1: "S"}})
    torch.manual_seed(1)
    export(RNNHead().eval().half(), (torch.randn(2, 5, 3).half(),), "half_rnn_batch_first", ["x"], ["y"], {"x": {0: "B", 1: "T"}})
    torch.manual_seed(2)
    export(
        CachedConvLSTMEncoder().eval(),
        (torch.randn(3, 1, 3), torch.zeros(1, 3, 2), torch.zeros(2, 1, 4), torch.zeros(2, 1, 4)),
        "cached_conv_lstm_encoder",
        ["x", "cache", "h", "c"],
        ["y", "new_cache", "hn", "cn"],
        None,
    )
    torch.manual_seed(3)
    export(
        torch.jit.script(FeatureCheckGRU().eval()), (torch.randn(4, 2, 3),), "feature_check_gru", ["x"], ["y", "h"], {"x": {0: "T", 1: "B"}}
    )


if __name__ == "__main__":
    main()
