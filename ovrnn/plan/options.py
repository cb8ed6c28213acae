"""The conversion's options, declared once: ``ConversionOptions`` holds each option's name, type and
default, the line ``convert_model``'s docstring gives it and the command line's flag for it. Every
other place is made from these fields:

    convert_model's keywords and docstring   (ovrnn/convert.py: ``takes`` and ``options_doc``)
    Request, checked by the plan             (plan/request.py: a ConversionOptions)
    the convert and validate flags           (cli/options.py: ``add_option_flags``, ``options_from_args``)
    ovrnn.validate's keywords                (validation/options.py: ValidateOptions.conversion)
    the reports' options and rerun commands  (validation/options.py)

A field added here is a keyword of convert_model and validate, a flag of both commands and a line
of the docstring (tests/plan/test_options.py proves each)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any

LOWERINGS = ("fastest", "cell", "matmul", "auto")  # what --lowering takes; fastest is the default
IR_VERSIONS = (10, 11)  # the IR versions the emitter writes (ir/emit.py checks the same pair)


@dataclass(frozen=True)
class Flag:
    """How the command line spells an option: ``--name-with-dashes`` plus `aliases`, and argparse's
    keywords. `parse` names the value's reader (cli/options.py): "count" (an integer >= 0), "int",
    "float", "pairs" (--stateful's optional IN=OUT pairs, repeatable); "" a switch for a bool, else text."""

    help: str
    parse: str = ""
    metavar: str | None = None
    choices: tuple = ()
    aliases: tuple[str, ...] = ()


def option(default: Any, doc: str, flag: Flag) -> Any:
    """A field of ConversionOptions: its default, its line in convert_model's docstring, its flag."""
    return field(default=default, metadata={"doc": doc, "flag": flag})


@dataclass(frozen=True)
class ConversionOptions:
    """convert_model's options as the caller gave them (``Request.checked()`` checks them). The
    order is the order of the command line's --help and of convert_model's docstring."""

    ir_version: int = option(
        11,
        "``ir_version`` 10 is offered for old runtimes (models made of RNN nodes only); 11 (the default) otherwise.",
        Flag("IR version to write (default 11; 10 for old runtimes)", parse="int", choices=IR_VERSIONS),
    )
    lowering: str = option(
        "fastest",
        '``lowering``: ``"fastest"`` (the default: for ``device="CPU"``, each direction takes the exact f32 form measured '
        'fastest on this CPU and OpenVINO release, ovrnn/data/cpu_forms.json; otherwise as ``"cell"``), ``"cell"`` '
        '(RNNCell/GRUCell/LSTMCell per step wherever the cell expresses the node), ``"matmul"`` (MatMul/Add/activation per '
        'step, for plugins without RNNCell such as NPU) or ``"auto"`` (chosen for ``device``\'s op set).',
        Flag(
            "fastest (default): with --device CPU, each direction's exact f32 form measured fastest on this CPU (tools/measure_forms.py), "
            "else as cell; cell: RNNCell/GRUCell/LSTMCell per step; matmul: MatMul/Add/activation per step (NPU); "
            "auto: chosen for --device",
            choices=LOWERINGS,
        ),
    )
    static: bool = option(
        False,
        "``static``: every shape static (NPU); dynamic input dims must be fixed with ``input``.",
        Flag("every shape static (for NPU): dynamic input dims must be fixed with --input"),
    )
    compress_to_fp16: bool = option(
        False,
        "``compress_to_fp16``: f32 weights stored as f16 with decompression Converts.",
        Flag("store f32 weights as f16 with decompression Converts (off by default)", aliases=("--compress_to_fp16",)),
    )
    chunk_steps: int | None = option(
        None,
        "``chunk_steps``: cut each cell chain into pieces of this many steps, which OpenVINO's CPU plugin compiles up to 2.7x "
        'faster (default 64; 256 where ``device="CPU"`` reads the measured forms: fewer pieces run faster there, '
        "docs/performance.md; 0: one piece, strictly one layer per step).",
        Flag(
            "cut each cell chain into N-step pieces OpenVINO's CPU plugin compiles faster "
            "(default 64, 256 with --device CPU; 0: one piece)",
            parse="count",
            metavar="N",
        ),
    )
    max_steps: int | None = option(
        None,
        "``max_steps``: refuse models that unroll to more steps than this (time steps x directions; default 8192; 0: no limit).",
        Flag(
            "refuse models that unroll to more than N steps (time steps x directions; default 8192; 0: no limit)",
            parse="count",
            metavar="N",
        ),
    )
    compress_weights: str | None = option(
        None,
        '``compress_weights``: ``"int8"`` (symmetric, one scale per row) or ``"int4"`` (experimental) for constant W/R; '
        "B, P and states stay float; see docs/compression.md.",
        Flag(
            "store constant W/R as int8 (one scale per row) or int4 (experimental); B, P and states stay float",
            choices=("int8", "int4"),
        ),
    )
    group_size: int | None = option(
        None,
        "``group_size``: int4's columns per scale, 32, 64, 128 or -1 (one scale per row, the default).",
        Flag("int4: columns per scale, 32, 64, 128 or -1 (one scale per row, the default)", parse="int", metavar="N"),
    )
    max_weight_error: float | None = option(
        None,
        "``max_weight_error``: the per-node budget of the quantization-only error measured at convert time (default 0.02): "
        "above it int4 falls back to int8, int8 to float.",
        Flag(
            "per-node budget of the quantization-only error measured at convert time (default 0.02): "
            "above it int4 falls back to int8, int8 to float",
            parse="float",
            metavar="E",
        ),
    )
    allow_sequence_ops: bool = option(
        False,
        "``allow_sequence_ops``: a recurrent node inside an If/Loop/Scan body whose step count is not known at conversion time "
        "is refused unless this is set; then OpenVINO's frontend converts every node of its op as an "
        "RNNSequence/GRUSequence/LSTMSequence (with its own readings), noted (docs/bodies.md).",
        Flag(
            "a recurrent node inside an If/Loop/Scan body whose step count is not known at conversion time: "
            "let OpenVINO's frontend convert every node of its op as a *Sequence op (default: refuse)"
        ),
    )
    device: str | None = option(
        None,
        '``device``: the device the IR is for, read by ``lowering`` ``"fastest"`` and ``"auto"`` (e.g. ``"CPU"``, ``"GPU"``, ``"NPU"``).',
        Flag("target device for --lowering fastest and auto (e.g. CPU, GPU, NPU)"),
    )
    stateful: bool | str | Sequence[str] | tuple = option(
        False,
        "``stateful``: ``True``: every forward RNN/GRU/LSTM node carries H (and C) across infer calls with ReadValue/Assign; "
        '``"state=stateN"`` or a list of ``"IN=OUT"``: those graph input/output pairs become states instead (docs/stateful_ir.md).',
        Flag(
            "a streaming IR: every forward RNN/GRU/LSTM node carries H (and C) across calls with ReadValue/Assign; "
            "with IN=OUT (repeatable, comma-separated), a graph input and output pair becomes one state instead (docs/stateful_ir.md)",
            parse="pairs",
            metavar="IN=OUT",
        ),
    )


OPTIONS: tuple[Field, ...] = fields(ConversionOptions)  # the declaration, in order
NAMES: tuple[str, ...] = tuple(f.name for f in OPTIONS)


def flag_of(f: Field) -> Flag:
    return f.metadata["flag"]


def options_doc(names: Sequence[str] = NAMES, indent: str = "    ") -> str:
    """The docstring's bullets: one per option, from its field."""
    return "\n".join(f"{indent}* {by_name(n).metadata['doc']}" for n in names)


def by_name(name: str) -> Field:
    return next(f for f in OPTIONS if f.name == name)


# --- a function whose keywords are these fields ---------------------------------------------------------


def parameters(source: type, *, positional: Sequence[str] = (), exclude: Sequence[str] = (), defaults: dict | None = None) -> list:
    """The fields of the dataclass `source` as ``inspect.Parameter``s: those of `positional` first,
    positional-or-keyword in that order, then the rest keyword-only; `defaults` overrides a field's."""
    by = {f.name: f for f in fields(source) if f.name not in exclude}
    defaults = defaults or {}

    def param(f: Field, kind) -> inspect.Parameter:
        default = defaults.get(f.name, f.default if f.default is not MISSING else f.default_factory())  # type: ignore[misc]
        return inspect.Parameter(f.name, kind, default=default, annotation=f.type)

    first = [param(by[n], inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in positional]
    return first + [param(f, inspect.Parameter.KEYWORD_ONLY) for n, f in by.items() if n not in positional]


def takes(params: list[inspect.Parameter]) -> Callable:
    """Decorator: the function takes `params` (help() and inspect show them). A call is bound to them
    first, so a keyword that is no option, a positional too many or a missing model is a TypeError, as
    for any Python function; the function then receives every parameter as a keyword, defaults filled."""
    signature = inspect.Signature(params)

    def wrap(function: Callable) -> Callable:
        @functools.wraps(function)
        def call(*args, **kwargs):
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"{function.__name__}() {exc}") from None
            bound.apply_defaults()
            return function(**bound.arguments)

        call.__signature__ = signature  # type: ignore[attr-defined]
        return call

    return wrap
