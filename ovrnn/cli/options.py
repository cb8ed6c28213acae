"""Argument types and argument groups that several commands share: numbers checked when the
command line is read, --stateful's pairs, and the conversion's flags of convert and validate (made
from ConversionOptions, plan/options.py, where each option is declared once)."""

from __future__ import annotations

import argparse


def int_at_least(low: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got '{text}'") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value

    return parse


POSITIVE = int_at_least(1, "a positive integer")
COUNT = int_at_least(0, "an integer >= 0")


def state_pairs(text: str) -> str:
    """--stateful's optional value: IN=OUT pairs. Anything else is most likely the model file."""
    for pair in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in pair:
            raise argparse.ArgumentTypeError(
                f"expected IN=OUT pairs such as state=stateN, got '{pair}' "
                "(to make every recurrent node stateful, put --stateful alone after the model file)"
            )
    return text


def stateful_arg(values: list[str] | None):
    """--stateful: True (every recurrent node), or its IN=OUT pairs (comma-separated, repeatable)."""
    if values is None:
        return False
    pairs = [p.strip() for v in values for p in v.split(",") if p.strip()]
    return pairs or True


# --- the conversion's flags, made from ConversionOptions (plan/options.py) ---------------------------

_READERS = {"count": COUNT, "int": int, "float": float, "pairs": state_pairs}
_FROM_ARGS = {"pairs": stateful_arg}  # the parsed value -> the option's value, where they differ


def add_option_flags(p: argparse.ArgumentParser, names=None, **own: dict) -> None:
    """One flag per conversion option (`names`: those, in the declaration's order; default all), as
    its field declares it; `own`: per option, argparse keywords this command gives it instead
    (validate's --device runs the IR, with a default)."""
    from ..plan.options import OPTIONS, flag_of

    for f in OPTIONS:
        if names is not None and f.name not in names:
            continue
        spec = flag_of(f)
        kwargs: dict = {"dest": f.name, "help": spec.help}
        if spec.parse == "pairs":  # --stateful alone, or with IN=OUT pairs; repeatable
            kwargs.update(action="append", nargs="?", const="", type=state_pairs)
        elif f.type in ("bool", bool):
            kwargs.update(action="store_true")
        else:
            kwargs["default"] = f.default
            if spec.parse:
                kwargs["type"] = _READERS[spec.parse]
        if spec.choices:
            kwargs["choices"] = spec.choices
        if spec.metavar:
            kwargs["metavar"] = spec.metavar
        kwargs.update(own.get(f.name, {}))
        p.add_argument(f"--{f.name.replace('_', '-')}", *spec.aliases, **kwargs)


def options_from_args(args, names=None) -> dict:
    """{option: value} of the conversion options the command line gave (`names`: those; default all)."""
    from ..plan.options import OPTIONS, flag_of

    return {
        f.name: _FROM_ARGS.get(flag_of(f).parse, lambda v: v)(getattr(args, f.name)) for f in OPTIONS if names is None or f.name in names
    }
