"""The conversion's options are declared once (ConversionOptions, ovrnn/plan/options.py): convert_model's
keywords and docstring, the Request the plan checks, the convert and validate flags, validate's
keywords and the report's options are all made from its fields, and a field added shows up in each."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import shlex

import pytest

import ovrnn
from ovrnn import cli
from ovrnn.cli.options import add_option_flags, options_from_args
from ovrnn.examples import DEMO_MODEL
from ovrnn.plan import options as declared
from ovrnn.plan.options import NAMES, ConversionOptions, Flag, option, options_doc, parameters
from ovrnn.plan.request import Request
from ovrnn.validation.options import CONVERSION, NOT_TAKEN, REPORTED, ValidateOptions

DEFAULTS = {f.name: f.default for f in dataclasses.fields(ConversionOptions)}


def conversion_flags(command: str) -> dict[str, object]:
    """{dest: argparse default} of a command's flags that are conversion options."""
    sub = cli.subparser(cli.build_parser(), command)
    return {a.dest: a.default for a in sub._actions if a.dest in DEFAULTS}


def test_every_option_has_a_doc_line_and_a_flag():
    for f in dataclasses.fields(ConversionOptions):
        assert f.metadata["doc"].startswith(f"``{f.name}``"), f.name
        assert isinstance(f.metadata["flag"], Flag) and f.metadata["flag"].help, f.name
    assert len(NAMES) == len(set(NAMES)) == 12


def test_convert_model_takes_exactly_the_declared_options():
    params = inspect.signature(ovrnn.convert_model).parameters
    assert list(params)[:3] == ["model", "input", "ir_version"]  # ovc's order: ir_version may be given third
    assert {n: p.default for n, p in params.items() if n not in ("model", "input")} == DEFAULTS
    assert [n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY] == [n for n in NAMES if n != "ir_version"]


def test_convert_model_docstring_has_a_line_per_option():
    doc = ovrnn.convert_model.__doc__
    for f in dataclasses.fields(ConversionOptions):
        assert f"* {f.metadata['doc']}" in doc
    assert doc.startswith("Convert an ONNX model")


def test_a_keyword_that_is_no_option_is_pythons_type_error():
    with pytest.raises(TypeError, match=r"^convert_model\(\) got an unexpected keyword argument 'lowerings'$"):
        ovrnn.convert_model(DEMO_MODEL, lowerings="cell")
    with pytest.raises(TypeError, match=r"^convert_model\(\) too many positional arguments$"):
        ovrnn.convert_model(DEMO_MODEL, None, 11, "cell")
    with pytest.raises(TypeError, match=r"^validate\(\) got an unexpected keyword argument 'ir_version'$"):
        ovrnn.validate(DEMO_MODEL, ir_version=10)


def test_request_is_the_options_plus_what_checking_resolves():
    own = [f.name for f in dataclasses.fields(Request)]
    assert own[: len(NAMES)] == list(NAMES) and own[len(NAMES) :] == ["compression"]
    given = ConversionOptions(lowering="matmul", stateful="a=b", compress_weights="int8")
    checked = Request.of(given).checked()
    assert (checked.lowering, checked.stateful, checked.compression.mode) == ("matmul", (("a", "b"),), "int8")


def test_the_convert_command_has_a_flag_per_option_with_its_default():
    flags = conversion_flags("convert")
    assert flags == {**DEFAULTS, "stateful": None}  # --stateful: absent (None) is stateful=False (options_from_args)


def test_the_validate_command_has_a_flag_per_option_it_takes():
    flags = conversion_flags("validate")
    assert set(flags) == set(CONVERSION) == set(NAMES) - set(NOT_TAKEN)
    assert flags == {**{n: DEFAULTS[n] for n in CONVERSION}, "device": "CPU", "stateful": None}  # validate runs on CPU by default
    params = inspect.signature(ovrnn.validate).parameters
    assert set(CONVERSION) <= set(params) and not set(NOT_TAKEN) & set(params)
    assert {n: params[n].default for n in CONVERSION} == {**{n: DEFAULTS[n] for n in CONVERSION}, "device": "CPU"}


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["convert", "m.onnx"], DEFAULTS),
        (
            [
                "convert",
                "m.onnx",
                "--ir-version",
                "10",
                "--lowering",
                "matmul",
                "--static",
                "--compress_to_fp16",
                "--chunk-steps",
                "0",
                "--max-steps",
                "9",
                "--compress-weights",
                "int4",
                "--group-size",
                "32",
                "--max-weight-error",
                "0.5",
                "--allow-sequence-ops",
                "--device",
                "NPU",
                "--stateful",
                "a=b,c=d",
                "--stateful",
                "e=f",
            ],
            dict(
                ir_version=10,
                lowering="matmul",
                static=True,
                compress_to_fp16=True,
                chunk_steps=0,
                max_steps=9,
                compress_weights="int4",
                group_size=32,
                max_weight_error=0.5,
                allow_sequence_ops=True,
                device="NPU",
                stateful=["a=b", "c=d", "e=f"],
            ),
        ),
        (["convert", "m.onnx", "--stateful"], {**DEFAULTS, "stateful": True}),
    ],
    ids=["defaults", "every-flag-given", "stateful-alone"],
)
def test_the_flags_read_back_as_the_options(argv, expected):
    args = cli.parse_args(argv)
    assert options_from_args(args) == expected
    assert set(expected) == set(NAMES)


def test_a_field_added_shows_up_everywhere(monkeypatch):
    """Every place reads the declaration: a new field is a keyword, a flag (read back), a doc line,
    a field of the request and of what validate takes."""
    extended = dataclasses.make_dataclass(
        "Extended",
        [("fold_twice", bool, option(False, "``fold_twice``: fold the model twice.", Flag("fold the model twice")))],
        bases=(ConversionOptions,),
        frozen=True,
    )
    monkeypatch.setattr(declared, "OPTIONS", dataclasses.fields(extended))
    monkeypatch.setattr(declared, "NAMES", tuple(f.name for f in dataclasses.fields(extended)))
    assert "fold_twice" in {p.name for p in parameters(extended)}
    assert "* ``fold_twice``: fold the model twice." in options_doc(declared.NAMES)
    parser = argparse.ArgumentParser(prog="x")
    add_option_flags(parser)
    args = parser.parse_args(["--fold-twice", "--lowering", "cell"])
    assert options_from_args(args) == {**DEFAULTS, "lowering": "cell", "fold_twice": True}


def test_validate_report_lists_every_option_and_reruns_with_it(tmp_path):
    """The report's options are the conversion options validate takes (but device and stateful, which
    have their own lines), so its rerun command repeats each one given: --max-steps was left out before."""
    assert REPORTED == tuple(n for n in CONVERSION if n not in ("device", "stateful"))
    report = ovrnn.validate(DEMO_MODEL, max_steps=100, chunk_steps=2, drift=False, use_onnxruntime=False, report_dir=tmp_path)
    assert report.passed
    assert report.options == {**{n: DEFAULTS[n] for n in REPORTED}, "max_steps": 100, "chunk_steps": 2, "cache_dir": None}
    rerun = json.loads((tmp_path / "report.json").read_text())["reproduce"]["command"]
    words = shlex.split(rerun)
    assert words[words.index("--max-steps") + 1] == "100" and words[words.index("--chunk-steps") + 1] == "2"
    again = cli.parse_args(words[1:])
    assert {k: v for k, v in options_from_args(again, CONVERSION).items() if k in REPORTED} == {n: report.options[n] for n in REPORTED}


def test_validate_takes_its_options_as_one_value():
    """ovrnn.validate's keywords are ValidateOptions' fields and the conversion's it takes, positional
    as they always were; the command line builds the same value."""
    params = inspect.signature(ovrnn.validate).parameters
    own = {f.name for f in dataclasses.fields(ValidateOptions)} - {"conversion"}
    assert set(params) == {"model", "input", "ir"} | own | set(CONVERSION)
    assert list(params)[:8] == ["model", "device", "input", "seed", "batch", "precision", "use_onnxruntime", "ir"]
    assert params["precision"].default == ValidateOptions().precision == "f32"
    options = ValidateOptions.of(seed=3, lowering="cell", stateful="h=hn", chunks=2)
    assert (options.seed, options.chunks, options.device, options.conversion.lowering, options.stateful) == (3, 2, "CPU", "cell", "h=hn")
    assert options.conversion == ConversionOptions(lowering="cell", stateful="h=hn", device="CPU")
    with pytest.raises(TypeError, match="unexpected keyword argument 'ir_version'"):
        ValidateOptions.of(ir_version=10)


def test_the_validate_command_defaults_are_validates():
    """`ovrnn validate MODEL` with no flag is ovrnn.validate(MODEL) with no keyword."""
    from ovrnn.cli.validate import validate_options

    from_cli = validate_options(cli.parse_args(["validate", "m.onnx"]))
    assert from_cli == ValidateOptions()


@pytest.mark.parametrize(
    "extra, refused",
    [
        (["--compress-weights", "int8"], "--compress-weights"),
        (["--max-steps", "10"], "--max-steps"),
        (["--chunk-steps", "0"], "--chunk-steps"),
        (["--compress-to-fp16"], "--compress-to-fp16"),
        (["--allow-sequence-ops"], "--allow-sequence-ops"),
    ],
    ids=["compress-weights", "max-steps", "chunk-steps", "compress-to-fp16", "allow-sequence-ops"],
)
def test_validate_streams_refuses_the_options_the_batcher_does_not_take(extra, refused, capsys):
    """The batcher converts with --lowering (and --device, --stateful) only: any other conversion flag
    with --streams was ignored without a word; now it is refused, before the model is read."""
    code = cli.main(["validate", "no_such_model.onnx", "--stateful", "a=b", "--streams", "2", *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        f"error: {refused} is not available with --streams (the batcher converts the model at each of its batch sizes with "
        "--lowering, --device, --stateful only)\n"
    )
