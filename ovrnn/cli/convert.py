"""``ovrnn convert``: an ONNX model to OUT.xml + OUT.bin (or an OVMS repository), and what was written."""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from ..families import named
from ..plan.options import NAMES
from .messages import notes
from .options import POSITIVE, add_option_flags, options_from_args


def add_parser(sub, common) -> None:
    c = sub.add_parser("convert", parents=[common], help="convert an ONNX model to OUT.xml + OUT.bin")
    c.add_argument("model", help="ONNX model file")
    c.add_argument(
        "-o",
        "--output",
        "--output_model",
        dest="output",
        help="output .xml path (the .bin goes next to it; default ./MODEL.xml, as ovc); or use --ovms-repo",
    )
    c.add_argument(
        "--input",
        action="append",
        metavar="[NAME][d0,d1,...]",
        help="fix an input's shape, ovc syntax: ? or -1 dynamic, lo..hi a range; no name: the inputs in order; "
        "NAME[SHAPE]{TYPE}->VALUE freezes an input to a constant (sr->16000, mask[3]{i32}->[1 0 1]); repeatable",
    )
    add_option_flags(c, [n for n in NAMES if n != "stateful"])  # every conversion option (plan/options.py); --stateful below
    c.add_argument(
        "--ovms-repo",
        metavar="DIR",
        help="write DIR/NAME/VERSION/model.xml|bin and DIR/config.json for OpenVINO Model Server (with --model-name)",
    )
    c.add_argument("--model-name", help="the model's name in the OVMS repository")
    c.add_argument(
        "--model-version", type=POSITIVE, default=None, help="the model's version in the OVMS repository, a positive integer (default 1)"
    )
    add_option_flags(c, ["stateful"])
    c.set_defaults(func=command)


def command(args) -> int:
    from ..convert import convert_model

    _check_destination(args)
    ir = convert_model(args.model, args.input, **options_from_args(args))
    if args.ovms_repo:
        from .ovms import save_to_repository

        xml_path, config, command = save_to_repository(ir, args.ovms_repo, args.model_name, args.model_version or 1)
        notes(ir.notes)
        print(f"wrote {xml_path}, {xml_path.with_suffix('.bin').name} and {config}")
        print(f"serve it with: {command}")
        return 0
    output = args.output or Path(args.model).with_suffix(".xml").name  # ovc: ./MODEL.xml
    xml_path = ir.save(output)
    notes(ir.notes)
    print(f"wrote {xml_path} and {xml_path.with_suffix('.bin')} ({len(ir.bin):,} bytes): {_layers_written(ir)}")
    return 0


def _check_destination(args) -> None:
    """-o OUT.xml or an OVMS repository, never both, and nothing of one given to the other."""
    if args.output and args.ovms_repo:
        raise UsageError("ovrnn convert: give either -o OUT.xml or --ovms-repo DIR --model-name NAME, not both")
    if not args.ovms_repo and (args.model_name or args.model_version is not None):
        given = " and ".join(f for f, v in (("--model-name", args.model_name), ("--model-version", args.model_version)) if v is not None)
        raise UsageError(
            f"ovrnn convert: {given} name{'s' if ' and ' not in given else ''} the model in an OVMS repository; add --ovms-repo DIR"
            + (" instead of -o" if args.output else "")
        )
    if args.ovms_repo and not args.model_name:
        raise UsageError("ovrnn convert: --ovms-repo needs --model-name")
    if args.ovms_repo and args.stateful is not None:
        raise UsageError(
            "ovrnn convert: --stateful cannot go with --ovms-repo: OpenVINO Model Server removed stateful models in 2026.3 "
            "(a ReadValue IR served there shares one state between all clients); write the IR with -o and stream it with "
            "ovrnn.Stream or OpenVINO"
        )


def _layers_written(ir) -> str:
    """'16 RNNCell layers, 4 explicit cells, 2 states carried between calls (...)'."""
    cells: dict[str, int] = {}
    for r in ir.rnns:
        cell = named(r.op).cell
        cells[cell] = cells.get(cell, 0) + sum(c.steps for c in r.chains if c.form == "cell")
    explicit = sum(c.steps for r in ir.rnns for c in r.chains if c.form == "explicit")
    kinds = ", ".join(f"{n} {cell} layers" for cell, n in cells.items() if n) or "0 RNNCell layers"
    kinds += f", {explicit} explicit cells" if explicit else ""
    states = ir.xml.count(b'type="ReadValue"')
    kinds += f", {states} state{'s' if states > 1 else ''} carried between calls (ovrnn inspect lists them)" if states else ""
    return kinds
