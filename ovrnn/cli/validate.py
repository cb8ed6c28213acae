"""``ovrnn validate``: convert, run on a device and compare with the float64 reference and
onnxruntime (with --stateful: the streaming contract); exit 1 on a mismatch."""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from ..plan.options import OPTIONS
from ..validation.options import CONVERSION
from .options import COUNT, POSITIVE, add_option_flags, int_at_least, options_from_args, stateful_arg


def add_parser(sub, common) -> None:
    v = sub.add_parser("validate", parents=[common], help="convert, run on a device and compare with the float64 reference and onnxruntime")
    v.add_argument("model", help="ONNX model file")
    add_option_flags(v, ["device"], device={"default": "CPU", "help": "OpenVINO device to run the IR on, as for run (default CPU)"})
    v.add_argument(
        "--input",
        action="append",
        metavar="[NAME][d0,d1,...]",
        help="fix an input's shape or freeze it to a value (as for convert); repeatable",
    )
    v.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    v.add_argument("--seed", type=COUNT, default=0, help="seed of the random inputs, an integer >= 0 (default 0)")
    v.add_argument("--batch", type=POSITIVE, default=None, help="batch size for dynamic batch dims (default 3)")
    v.add_argument("--precision", default="f32", help="INFERENCE_PRECISION_HINT (default f32)")
    v.add_argument("--no-onnxruntime", action="store_true", help="compare with the reference only")
    v.add_argument("--cache-dir", help="OpenVINO model cache folder (CACHE_DIR)")
    v.add_argument(
        "--report", metavar="DIR", help="write report.json, report.md, error_per_step.png and the inputs/outputs to reproduce into DIR"
    )
    v.add_argument(
        "--no-drift",
        action="store_true",
        help="leave out the drift line: each recurrent node streamed for 1024 steps at the device's default precision "
        "(compiled without a hint) against float64",
    )
    v.add_argument(
        "--report-precisions", default="f32", help="inference precisions to plot the per-step error for, e.g. f32,bf16,f16 (default f32)"
    )
    # the streaming contract of convert --stateful (docs/streaming.md)
    add_option_flags(
        v,
        ["stateful"],
        stateful={
            "help": "convert with --stateful (IN=OUT: those state pairs) and prove the stream: N calls == the whole sequence "
            "(pairs: the ONNX model call by call, the state carried by hand), final states, reset, two streams, set_state, batch, "
            "a 1000-step stream"
        },
    )
    v.add_argument(
        "--chunks",
        type=int_at_least(2, "a number of calls >= 2"),
        default=None,
        metavar="N",
        help="with --stateful: the calls of K steps the stream runs (default 4); with --streams: the chunks of each stream (default 8)",
    )
    # a served model: many streams through StreamBatcher vs each alone (docs/batching.md)
    v.add_argument(
        "--streams",
        type=POSITIVE,
        default=None,
        metavar="N",
        help="with --stateful: serve N streams through ovrnn.StreamBatcher in a random arrival order and compare each with "
        "itself run alone (the model at batch 1, onnxruntime, the float64 reference); --input gives one stream's shapes "
        "(batch 1) and frozen inputs",
    )
    v.add_argument(
        "--context",
        action="append",
        default=None,
        metavar="NAME=L",
        help="with --streams: the last L entries of input NAME (its last axis) start the next chunk's NAME, as silero's 64 "
        "samples; repeatable",
    )
    add_option_flags(v, [n for n in CONVERSION if n not in ("device", "stateful")])  # the conversion's other options (plan/options.py)
    v.set_defaults(func=command)


def command(args) -> int:
    if args.json or args.report:
        _refuse_overwriting_the_model(args)
    if args.streams is not None or args.context:
        report = _served(args)
    else:
        report = _validate(args)
    print(report.format())
    if args.report:
        print(f"wrote the report to {args.report}")
    if args.json:
        from ..fileio import write_atomic

        write_atomic({Path(args.json): report.to_json().encode() + b"\n"}, inputs=source_files(args.model))
    return 0 if report.passed else 1


def _served(args):
    """validate --streams N (ovrnn/validation/stream_batch.py)."""
    from ..validation.stream_batch import validate_streams

    if args.streams is None:
        raise UsageError("--context is the input context of --streams N: add --streams")
    for flag_name, given in (
        ("--report", args.report),
        ("--batch", args.batch),
        ("--report-precisions", args.report_precisions != "f32"),
        ("--static", args.static),
    ):
        if given:
            raise UsageError(
                f"{flag_name} is not available with --streams (each stream is batch 1; the batcher compiles its own static sizes)"
            )
    given = options_from_args(args, CONVERSION)
    for name in CONVERSION:  # the batcher converts the model at each of its sizes with these options only
        if name not in STREAMS_TAKE and given[name] != DEFAULTS[name]:
            raise UsageError(
                f"--{name.replace('_', '-')} is not available with --streams (the batcher converts the model at each of its batch sizes "
                f"with {', '.join('--' + n for n in STREAMS_TAKE)} only)"
            )
    return validate_streams(
        args.model,
        args.streams,
        stateful_arg(args.stateful),
        context=_contexts(args.context),
        input=args.input,
        seed=args.seed,
        chunks=args.chunks,
        device=args.device,
        precision=args.precision,
        use_onnxruntime=not args.no_onnxruntime,
        cache_dir=args.cache_dir,
        lowering=args.lowering,
    )


STREAMS_TAKE = ("lowering", "device", "stateful")  # --static is refused above, for its own reason
DEFAULTS = {f.name: f.default for f in OPTIONS}


def _contexts(values: list[str] | None) -> dict[str, int]:
    out = {}
    for item in (p.strip() for v in values or () for p in v.split(",")):
        name, sep, length = item.partition("=")
        if not sep or not name.strip() or not length.strip().isdigit() or int(length) < 1:
            raise UsageError(f"--context: expected NAME=L with L a number of entries >= 1, such as \"input=64\", got '{item}'")
        out[name.strip()] = int(length)
    return out


def _validate(args):
    from ..validation.validate import run_validation

    return run_validation(args.model, args.input, None, validate_options(args))


def validate_options(args):
    """The flags as ovrnn.validate's options (validation/options.py)."""
    from ..validation.options import ValidateOptions

    return ValidateOptions.of(
        seed=args.seed,
        batch=args.batch,
        precision=args.precision,
        use_onnxruntime=not args.no_onnxruntime,
        cache_dir=args.cache_dir,
        report_dir=args.report,
        report_precisions=tuple(_precisions(args.report_precisions)),
        chunks=args.chunks,
        drift=not args.no_drift,
        **options_from_args(args, CONVERSION),
    )


def _refuse_overwriting_the_model(args) -> None:
    """--json FILE and the --report files must not be the model or its external data."""
    from ..fileio import refuse_overwriting_inputs
    from ..validation.report import REPORT_FILES

    outputs = ([Path(args.json)] if args.json else []) + ([Path(args.report) / f for f in REPORT_FILES] if args.report else [])
    refuse_overwriting_inputs(outputs, source_files(args.model))


def source_files(model: str) -> list[Path]:
    """The model file and its external data files."""
    from ..onnx.reading.read import load_model

    files: list[Path] = []
    load_model(model, files)
    return files


def _precisions(text: str) -> list[str]:
    values = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in values if p not in ("f32", "f16", "bf16")]
    if bad or not values:
        raise UsageError(f"--report-precisions: expected a comma-separated list of f32, f16, bf16, got '{text}'")
    return values
