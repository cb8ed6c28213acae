"""The example models bundled with ovrnn (``ovrnn demo``, the README and docs/streaming.md use them)."""

from pathlib import Path

DEMO_MODEL = Path(__file__).resolve().parent / "demo_rnn.onnx"
STREAM_MODEL = Path(__file__).resolve().parent / "stream_lstm.onnx"  # a forward LSTM, X[4,batch,3], for docs/streaming.md
