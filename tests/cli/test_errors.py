"""Bad input: the exact one-line message, the error type, exit status 2 and no files written."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from cases import Case, make_model
from conftest import ovrnn_cli, replace_init, set_attr
from onnx import TensorProto

import ovrnn
from ovrnn.errors import InvalidModelError, UnsupportedFeatureError, UsageError

NODE = "RNN node 'rnn'"


def _mutated(mutate, **case):
    model, _, _ = make_model(Case("err", **case))
    mutate(model)
    return model


def _attr(name, value, **case):
    """The model factory of a BAD row: the case's model with its node's attribute `name` set to `value`."""
    return lambda: _mutated(lambda m: set_attr(m, name, value), **case)


def _init(name, array, **case):
    """The model factory of a BAD row: the case's model with initializer `name` replaced by `array`."""
    return lambda: _mutated(lambda m: replace_init(m, name, array), **case)


def _plain(**case):
    """The model factory of a BAD row: the case's model as make_model writes it."""
    return lambda: _mutated(lambda m: None, **case)


# (id, model factory, --input flags, error type, exact message)
BAD = [
    (
        "unknown-activation",
        _attr("activations", ["Swish"]),
        None,
        InvalidModelError,
        (
            f"{NODE}: attribute 'activations': unknown activation 'Swish' (expected one of: Relu, Tanh, Sigmoid, Affine, "
            "LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)"
        ),
    ),
    (
        "unknown-direction",
        _attr("direction", "sideways"),
        None,
        InvalidModelError,
        f"{NODE}: attribute 'direction': expected one of forward, reverse, bidirectional, got 'sideways'",
    ),
    ("layout-2", _attr("layout", 2), None, InvalidModelError, f"{NODE}: attribute 'layout': expected 0 or 1, got 2"),
    ("hidden-size-0", _attr("hidden_size", 0), None, InvalidModelError, f"{NODE}: attribute 'hidden_size': expected a value > 0, got 0"),
    (
        "hidden-size-negative",
        _attr("hidden_size", -3),
        None,
        InvalidModelError,
        f"{NODE}: attribute 'hidden_size': expected a value > 0, got -3",
    ),
    (
        "hidden-size-contradicts-R",
        _attr("hidden_size", 7),
        None,
        InvalidModelError,
        f"{NODE}: input R 'R' has shape [1,5,5]: dim 1 (hidden_size) is 5, expected 7 from attribute 'hidden_size'",
    ),
    (
        "W-contradicts-R",
        _init("W", np.zeros((1, 4, 3), np.float32)),
        None,
        InvalidModelError,
        f"{NODE}: input W 'W' has shape [1,4,3]: dim 1 (hidden_size) is 4, expected 5 from attribute 'hidden_size'",
    ),
    (
        "B-wrong-width",
        _init("B", np.zeros((1, 8), np.float32)),
        None,
        InvalidModelError,
        f"{NODE}: input B 'B' has shape [1,8]: dim 1 (2*hidden_size) is 8, expected 10 from attribute 'hidden_size'",
    ),
    (
        "B-odd-width",
        _init("B", np.zeros((1, 9), np.float32), hidden_size_attr=False),
        None,
        InvalidModelError,
        f"{NODE}: input B 'B' has shape [1,9]: dim 1 must be 2*hidden_size, got odd 9",
    ),
    (
        "W-two-directions-forward",
        _init("W", np.zeros((2, 5, 3), np.float32)),
        None,
        InvalidModelError,
        f"{NODE}: input W 'W' has shape [2,5,3]: dim 0 (num_directions) is 2, expected 1 from direction 'forward'",
    ),
    (
        "X-rank-2",
        lambda: _mutated(lambda m: m.graph.input[0].type.tensor_type.shape.dim.pop()),
        None,
        InvalidModelError,
        f"{NODE}: input X 'X': expected rank 3 [seq_length, batch, input_size], got rank 2 [4,2]",
    ),
    (
        "X-input-size-contradicts-W",
        lambda: _mutated(lambda m: setattr(m.graph.input[0].type.tensor_type.shape.dim[2], "dim_value", 6)),
        None,
        InvalidModelError,
        f"{NODE}: input X 'X' has shape [4,2,6]: dim 2 (input_size) is 6, expected 3 from input W 'W' dim 2",
    ),
    (
        "W-dtype-mismatch",
        _init("W", np.zeros((1, 5, 3), np.float16)),
        None,
        InvalidModelError,
        f"{NODE}: input W 'W': expected element type float (the type of X), got float16",
    ),
    (
        "X-integer",
        lambda: _mutated(lambda m: setattr(m.graph.input[0].type.tensor_type, "elem_type", TensorProto.INT32)),
        None,
        InvalidModelError,
        f"{NODE}: input X 'X': expected element type float, float16, double or bfloat16, got int32",
    ),
    (
        "missing-W",
        lambda: _mutated(lambda m: m.graph.node[0].input.__setitem__(1, "")),
        None,
        InvalidModelError,
        f"{NODE}: required input 'W' (input 1) is missing",
    ),
    (
        "dangling-input",
        lambda: _mutated(lambda m: m.graph.node[0].input.__setitem__(2, "nowhere")),
        None,
        InvalidModelError,
        f"{NODE}: input 'R' is tensor 'nowhere', which no graph input, initializer or earlier node provides",
    ),
    (
        "attribute-wrong-type",
        _attr("hidden_size", 5.0),
        None,
        InvalidModelError,
        f"{NODE}: attribute 'hidden_size': expected type INT, got FLOAT",
    ),
    (
        "direction-wrong-type",
        _attr("direction", 1),
        None,
        InvalidModelError,
        f"{NODE}: attribute 'direction': expected type STRING, got INT",
    ),
    (
        "unknown-attribute",
        _attr("foo", 1),
        None,
        InvalidModelError,
        (
            f"{NODE}: attribute 'foo' is not an attribute of RNN-14 (expected one of: activation_alpha, activation_beta, "
            "activations, clip, direction, hidden_size, layout)"
        ),
    ),
    (
        "layout-before-opset-14",
        _attr("layout", 0, opset=7),
        None,
        InvalidModelError,
        (
            f"{NODE}: attribute 'layout' is not an attribute of RNN-7 (expected one of: activation_alpha, activation_beta, "
            "activations, clip, direction, hidden_size)"
        ),
    ),
    ("negative-clip", _attr("clip", -1.0), None, InvalidModelError, f"{NODE}: attribute 'clip': expected a threshold >= 0, got -1"),
    (
        "three-activations-bidir",
        _attr("activations", ["Tanh", "Relu", "Tanh"], direction="bidirectional"),
        None,
        InvalidModelError,
        f"{NODE}: attribute 'activations': expected 2 activation(s) for 2 direction(s), got 3 (Tanh, Relu, Tanh)",
    ),
    (
        "lens-too-long",
        _plain(lens=(5, 2), lens_const=True),
        None,
        InvalidModelError,
        (
            f"{NODE}: input sequence_lens 'sequence_lens': value 5 at batch index 0 is out of range, expected 0 <= length <= 4 "
            "(the sequence length)"
        ),
    ),
    (
        "lens-negative",
        _plain(lens=(3, -1), lens_const=True),
        None,
        InvalidModelError,
        (
            f"{NODE}: input sequence_lens 'sequence_lens': value -1 at batch index 1 is out of range, expected 0 <= length <= 4 "
            "(the sequence length)"
        ),
    ),
    (
        "lens-int64",
        lambda: _mutated(lambda m: setattr(m.graph.input[1].type.tensor_type, "elem_type", TensorProto.INT64), lens=(4, 2)),
        None,
        InvalidModelError,
        f"{NODE}: input sequence_lens 'sequence_lens': expected element type int32, got int64",
    ),
    (
        "lens-wrong-batch",
        lambda: _lens_batch_mismatch(),  # noqa: PLW0108 (defined below)
        None,
        InvalidModelError,
        f"{NODE}: input sequence_lens 'sequence_lens' has shape [3]: dim 0 (batch) is 3, expected 2 from input X 'X' dim 1",
    ),
    (
        "future-opset",
        lambda: _mutated(lambda m: setattr(m.opset_import[0], "version", 99)),
        None,
        UnsupportedFeatureError,
        (
            f"model opset_import: ai.onnx opset 99 is newer than the newest this onnx {onnx.__version__} knows "
            f"({onnx.defs.onnx_opset_version()}); expected an opset between 1 and {onnx.defs.onnx_opset_version()}"
        ),
    ),
    (
        "no-opset",
        lambda: _mutated(lambda m: m.opset_import.pop()),
        None,
        InvalidModelError,
        "model declares no ai.onnx opset in opset_import",
    ),
    (
        "dynamic-seq-no-input",
        _plain(dyn_seq=True),
        None,
        UsageError,
        (
            f"{NODE}: the sequence length (dim 0 of X 'X') is dynamic ('seq'), and the RNNCell chain needs a fixed number of "
            'steps; fix it with --input "X[T,2,3]" (T = number of time steps)'
        ),
    ),
    # the README's "Not supported": zero time steps or a batch of 0 (a sequence_lens entry of 0 is supported)
    (
        "zero-steps",
        _plain(dyn_seq=True),
        ["X[0,2,3]"],
        UnsupportedFeatureError,
        f"{NODE}: input X 'X' has sequence length 0; expected at least 1 step",
    ),
    (
        "zero-batch",
        _plain(dyn_batch=True),
        ["X[4,0,3]"],
        UnsupportedFeatureError,
        f"{NODE}: input X 'X' has batch size 0; expected at least 1",
    ),
    ("input-unknown-name", _plain(), ["Z[1,2]"], UsageError, "--input 'Z': the model has no input of that name (inputs: X)"),
    (
        "input-initializer",
        _plain(),
        ["W[1,5,3]"],
        UsageError,
        "--input 'W': this is an initializer (constant), not a graph input; only inputs can be reshaped",
    ),
    ("input-wrong-rank", _plain(), ["X[4,2]"], UsageError, "--input 'X': rank 2 [4,2], but the model declares rank 3 [4,2,3]"),
    ("input-conflicting-dim", _plain(), ["X[4,2,7]"], UsageError, "--input 'X': dim 2 is 7, but the model declares 3"),
    (
        "input-malformed",
        _plain(),
        ["X[4,two,3]"],
        UsageError,
        "--input 'X[4,two,3]': bad dimension 'two' (expected an integer, ?, -1 or lo..hi)",
    ),
    ("input-unbalanced", _plain(), ["X[4,2,3"], UsageError, "--input 'X[4,2,3': expected NAME[d0,d1,...] or [d0,d1,...], got 'X[4,2,3'"),
    (
        "declared-output-wrong",
        lambda: _mutated(lambda m: setattr(m.graph.output[0].type.tensor_type.shape.dim[0], "dim_value", 9)),
        None,
        InvalidModelError,
        "graph output 'Y': declared shape [9,1,2,5], but the RNN produces [4,1,2,5]",
    ),
]


def _lens_batch_mismatch():
    model, _, _ = make_model(Case("err", lens=(4, 2), lens_const=True))
    replace_init(model, "sequence_lens", np.array([4, 2, 1], np.int32))
    return model


@pytest.mark.parametrize("case_id, factory, flags, error, message", BAD, ids=[b[0] for b in BAD])
def test_api_error(case_id, factory, flags, error, message):
    with pytest.raises(error) as info:
        ovrnn.convert_model(factory(), flags)
    # a Python caller hears of parameters (input="X[T,2,3]"), not of flags (--input "X[T,2,3]")
    assert str(info.value) == message.replace('--input "', 'input="').replace("--input", "input")


@pytest.mark.parametrize("case_id, factory, flags, error, message", BAD, ids=[b[0] for b in BAD])
def test_cli_error_one_line_exit_2_no_files(tmp_path, case_id, factory, flags, error, message):
    model_path = tmp_path / "m.onnx"
    onnx.save(factory(), model_path)
    out = tmp_path / "new_folder" / "m.xml"
    args = ["convert", model_path, "-o", out] + [a for f in flags or () for a in ("--input", f)]
    proc = ovrnn_cli(*args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"error: {message}\n"
    assert proc.stdout == ""
    assert not (tmp_path / "new_folder").exists()


def _write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.mark.parametrize(
    "case_id, make, message",
    [
        ("empty", lambda t: _write(t, "empty.onnx", b""), "'{path}' is empty (0 bytes), not an ONNX model"),
        (
            "text",
            lambda t: _write(t, "text.onnx", b"not a model\n" * 8),
            (
                "'{path}' is not an ONNX model (protobuf parse failed: Error parsing message with type 'onnx.ModelProto': Wire "
                "format was corrupt)"
            ),
        ),
        (
            "truncated",
            lambda t: _write(t, "trunc.onnx", make_model(Case("t"))[0].SerializeToString()[:150]),
            (
                "'{path}' is not an ONNX model (protobuf parse failed: Error parsing message with type 'onnx.ModelProto': Wire "
                "format was corrupt)"
            ),
        ),
        ("missing", lambda t: t / "missing.onnx", "model file '{path}' does not exist"),
        ("folder", lambda t: t, "model path '{path}' is a folder, expected an .onnx file"),
    ],
    ids=["empty", "text", "truncated", "missing", "folder"],
)
def test_file_errors(tmp_path, case_id, make, message):
    path = make(tmp_path)
    proc = ovrnn_cli("convert", path, "-o", tmp_path / "out" / "m.xml")
    assert proc.returncode == 2
    assert proc.stderr == "error: " + message.format(path=path) + "\n"
    assert not (tmp_path / "out").exists()


def test_output_path_must_be_xml(tmp_path):
    model_path = tmp_path / "m.onnx"
    onnx.save(make_model(Case("ok"))[0], model_path)
    proc = ovrnn_cli("convert", model_path, "-o", tmp_path / "m.txt")
    assert proc.returncode == 2
    assert proc.stderr == f"error: output path '{tmp_path / 'm.txt'}' must end with .xml (the .bin is written next to it)\n"
    assert list(tmp_path.iterdir()) == [model_path]


def test_bad_flag_is_one_line(tmp_path):
    proc = ovrnn_cli("convert", "m.onnx", "--outptu", "x.xml")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ")
