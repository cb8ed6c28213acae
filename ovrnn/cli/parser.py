"""The command line's parser: each command adds its own arguments (``add_parser`` in its
module); a usage error is one line, and a mistyped flag gets the nearest real one."""

from __future__ import annotations

import argparse
import difflib

from .. import __version__
from ..errors import UsageError
from . import convert, demo, devices, inspect, run, validate

COMMANDS = (convert, run, validate, inspect, devices, demo)  # in the order --help lists them


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


class _VersionAction(argparse.Action):
    """``ovrnn --version``: ovrnn's version and the OpenVINO build it runs on."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="print ovrnn's and OpenVINO's versions and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        try:
            from ..device.ov import ov

            build = ov().get_version()
        except Exception as exc:  # noqa: BLE001 - a broken OpenVINO install must not hide ovrnn's version
            build = f"not loadable ({type(exc).__name__})"
        print(f"ovrnn {__version__} (OpenVINO {build})")
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="ovrnn", description="ONNX RNN -> OpenVINO IR as an unrolled RNNCell chain; run and validate it.")
    p.add_argument("--version", action=_VersionAction)
    common = Parser(add_help=False)
    talk = common.add_mutually_exclusive_group()
    talk.add_argument("-v", "--verbose", action="store_true", help="show progress (compile, inferences) even when stderr is not a terminal")
    talk.add_argument("-q", "--quiet", action="store_true", help="no notes and no progress: only results and errors")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS:
        command.add_parser(sub, common)
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    """argparse, plus what an OpenVINO user expects: a mistyped flag gets the nearest real one."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        sub = subparser(parser, args.command)
        known = [o for a in sub._actions for o in a.option_strings if o.startswith("--")]
        first = extra[0]
        flag_ = first.split("=")[0]
        guess = difflib.get_close_matches(flag_, known, n=1, cutoff=0.6) if first.startswith("-") else []
        hint = f"; did you mean {guess[0]}?" if guess else ""
        if args.command == "convert" and flag_ == "--version":
            hint = "; the OVMS model version is --model-version (ovrnn --version prints ovrnn's own)"
        raise UsageError(
            f"{sub.prog}: unrecognized argument{'s' if len(extra) > 1 else ''}: {' '.join(extra)}{hint} (see {sub.prog} --help)"
        )
    return args


def subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of one command (``convert``, ``run``, ...)."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[command]
