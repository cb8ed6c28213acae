"""Dimensions and shapes, their limits, and the ovc-style ``--input NAME[d0,d1,...]`` syntax; and
the limits on what ovrnn reads and builds (arrays in bytes, IR size), so that hostile or huge input
ends in a clear error, not an exhausted machine: each ``OVRNN_*`` limit can be raised through that
environment variable (a plain integer).

A ``Dim`` is an interval ``[lo, hi]`` (``hi=None`` = unbounded), the same model OpenVINO's
``PartialShape`` uses: a static dim has ``lo == hi``. ONNX symbolic dims keep their symbol so error
messages can name them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from .errors import UsageError, flag

# The two limits every shape keeps (checked where a shape is read: --input, declared inputs, --batch);
# the limits on arrays in bytes and IR size are at the end of this module.
MAX_DIM = 2**31 - 1  # one dimension (OpenVINO plugins index with int32)
MAX_ELEMENTS = 2**40  # elements in one tensor of fixed shape (2^40 float32 is 4 TiB)


def check_shape(shape, what: str) -> None:
    """A graph input's Dims: lo and hi each at most MAX_DIM, the static ones' product bounded."""
    for axis, d in enumerate(shape):
        for v in (d.lo, d.hi):
            if v is not None and v > MAX_DIM:
                raise UsageError(f"{what}: dim {axis} is {d.describe()}, more than the largest dimension ovrnn accepts ({MAX_DIM:,})")
    check_dims([d.value for d in shape], what)


def check_dims(dims, what: str) -> None:
    """Each dim at most MAX_DIM, and their product at most MAX_ELEMENTS (None: dynamic, skipped)."""
    product = 1
    for axis, d in enumerate(dims):
        if d is None:
            continue
        if d > MAX_DIM:
            raise UsageError(f"{what}: dim {axis} is {d}, more than the largest dimension ovrnn accepts ({MAX_DIM:,})")
        product *= d
        if product > MAX_ELEMENTS:
            raise UsageError(f"{what}: the dims multiply to more than {MAX_ELEMENTS:,} elements")


@dataclass(frozen=True, slots=True)
class Dim:
    lo: int = 0
    hi: int | None = None
    symbol: str | None = None  # ONNX dim_param, for messages only
    given: str | None = field(default=None, compare=False)  # how the user wrote it, for messages only

    @staticmethod
    def of(value: int | None, symbol: str | None = None) -> Dim:
        return Dim() if value is None else Dim(value, value)

    @property
    def value(self) -> int | None:
        """The static value, or None when the dim is dynamic."""
        return self.lo if self.hi == self.lo else None

    @property
    def is_static(self) -> bool:
        return self.hi == self.lo

    def ir(self) -> str:
        """Parameter `shape=` syntax: "5", "?", "1..10", "..10", "2.."."""
        if self.is_static:
            return str(self.lo)
        if self.lo == 0 and self.hi is None:
            return "?"
        return f"{self.lo if self.lo else ''}..{'' if self.hi is None else self.hi}"

    def port(self) -> int:
        """Port `<dim>` value: -1 for any dynamic dim, as the serializer writes."""
        return self.lo if self.is_static else -1

    def describe(self) -> str:
        if self.is_static:
            return str(self.lo)
        if self.given:
            return self.given
        return f"'{self.symbol}'" if self.symbol else self.ir()

    def __mul__(self, other: Dim) -> Dim:
        if self.is_static and other.is_static:
            return Dim.of(self.lo * other.lo)
        hi = None if self.hi is None or other.hi is None else self.hi * other.hi
        return Dim(self.lo * other.lo, hi)

    def merge(self, other: Dim) -> Dim | None:
        """Intersection of two dims; None when they contradict."""
        lo = max(self.lo, other.lo)
        his = [h for h in (self.hi, other.hi) if h is not None]
        hi = min(his) if his else None
        if hi is not None and lo > hi:
            return None
        return Dim(lo, hi, self.symbol or other.symbol, self.given or other.given)

    def example(self) -> int:
        """A number the user can paste for this dim: itself, a range's bound, or 1."""
        if self.is_static:
            return self.lo
        return self.lo if self.lo > 0 else (self.hi if self.hi is not None else 1)


Shape = tuple[Dim, ...]


def static(*values: int) -> Shape:
    return tuple(Dim.of(v) for v in values)


def shape_ir(shape: Shape) -> str:
    return ",".join(d.ir() for d in shape)


def shape_text(shape: Shape | None) -> str:
    return "unknown" if shape is None else "[" + ",".join(d.describe() for d in shape) + "]"


# --- ovc's --input syntax -----------------------------------------------------------------------
# "X[5,?,3]", "X[5,-1,3],L[?]", "X[1..10,2,3]", "name with spaces[2,3]". Dims: int, ?, -1, a..b.

_DIM_RE = re.compile(r"^\s*(?:(-1|\?)|(\d+)|(\d*)\s*\.\.\s*(\d*))\s*$")


def parse_dim(text: str, spec: str) -> Dim:
    m = _DIM_RE.match(text)
    if not m:
        raise UsageError(f"{flag('input')} '{spec}': bad dimension '{text}' (expected an integer, ?, -1 or lo..hi)")
    given = f"{text.strip()}, as given in {flag('input')} '{spec}'"
    if m.group(1):
        return Dim(given=given)
    for g in (m.group(2), m.group(3), m.group(4)):
        if g and int(g) > MAX_DIM:
            raise UsageError(f"{flag('input')} '{spec}': dimension {int(g)} is larger than the largest ovrnn accepts ({MAX_DIM:,})")
    if m.group(2):
        return Dim.of(int(m.group(2)))
    lo = int(m.group(3)) if m.group(3) else 0
    hi = int(m.group(4)) if m.group(4) else None
    if hi is not None and lo > hi:
        raise UsageError(f"{flag('input')} '{spec}': empty range '{text}'")
    return Dim(lo, hi, given=given)


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are outside [...]."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


class Position(int):
    """The key of an unnamed shape (ovc's ``--input "[5,?,3]"``): the model's n-th input."""


InputShapeMap = dict["str | Position", "Shape | None"]


def parse_input_specs(specs: list[str] | tuple[str, ...] | None) -> InputShapeMap:
    """Parse repeated ``--input`` values into {name: shape or None (name only)}; an unnamed
    shape ``[5,?,3]`` is keyed by its position among the unnamed ones (``Position``)."""
    result: InputShapeMap = {}
    unnamed = 0
    for spec in specs or ():
        for item in _split_top_level(spec):
            name, shape = _parse_one(item.strip(), spec)
            if name is None:
                name, unnamed = Position(unnamed), unnamed + 1
            elif name in result:
                raise UsageError(f"{flag('input')}: input '{name}' is given twice")
            result[name] = shape
    return result


def _parse_one(item: str, spec: str) -> tuple[str | None, Shape | None]:
    if not item:
        raise UsageError(f"{flag('input')} '{spec}': empty entry")
    if "[" not in item and "]" not in item:
        return item, None
    open_at = item.find("[")
    if open_at < 0 or not item.endswith("]") or item.count("[") != 1 or item.count("]") != 1:
        raise UsageError(f"{flag('input')} '{spec}': expected NAME[d0,d1,...] or [d0,d1,...], got '{item}'")
    name, body = item[:open_at].strip() or None, item[open_at + 1 : -1]
    if not body.strip():
        return name, ()
    return name, tuple(parse_dim(d, spec) for d in body.split(","))


# --- the Python forms ov.convert_model(input=...) takes for a shape -----------------------------------


def _is_dim(d: object) -> bool:
    return (
        d is None
        or (isinstance(d, int) and not isinstance(d, bool))
        or hasattr(d, "get_min_length")
        or (isinstance(d, tuple) and len(d) == 2 and all(isinstance(x, int) for x in d))
    )


def _is_ov_shape(value: object) -> bool:
    """ov.Shape (static, iterates ints; ov.convert_model takes it where a PartialShape goes)."""
    return type(value).__name__ == "Shape" and type(value).__module__.split(".")[0] == "openvino"


def is_shape(value: object) -> bool:
    if (hasattr(value, "rank") and hasattr(value, "is_static")) or _is_ov_shape(value):  # ov.PartialShape, ov.Shape
        return True
    return isinstance(value, (list, tuple)) and all(_is_dim(d) for d in value)


def shape_of(value: object, who: str) -> Shape | None:
    """[5, -1, 3], [5, None, 3], [Dimension(1, 10), ...], PartialShape, (lo, hi) ranges."""
    if value is None:
        return None
    if hasattr(value, "rank") and hasattr(value, "is_static"):
        if value.rank.is_dynamic:
            return None
        value = list(value)
    if _is_ov_shape(value):
        value = [int(d) for d in value]
    if not isinstance(value, (list, tuple)) or not all(_is_dim(d) for d in value):
        raise UsageError(
            f"{flag('input')} '{who}': cannot read {value!r} as a shape (a list of ints, -1/None for dynamic, (lo, hi) ranges "
            "or ov.Dimension)"
        )
    dims = []
    for d in value:
        if d is None or d == -1:
            dims.append(Dim())
        elif isinstance(d, tuple):
            lo, hi = d
            dims.append(Dim(max(lo, 0), None if hi < 0 else hi))
        elif hasattr(d, "get_min_length"):
            hi = d.get_max_length()
            dims.append(Dim.of(d.get_length()) if d.is_static else Dim(max(d.get_min_length(), 0), None if hi < 0 else hi))
        elif d < 0:
            raise UsageError(f"{flag('input')} '{who}': bad dimension {d} (expected a size >= 0, or -1 for dynamic)")
        else:
            dims.append(Dim.of(d))
    return tuple(dims)


# --- limits on what ovrnn reads and builds ---------------------------------------------------------


def _env_limit(name: str, default: int) -> int:
    text = os.environ.get(name)
    if text is None or text == "":
        return default
    if not text.strip().isdigit() or int(text) <= 0:
        raise UsageError(f"environment variable {name}='{text}': expected a positive integer")
    return int(text)


def max_input_bytes() -> int:
    """One input array of `ovrnn run --input`: a .npy file, or one .npz member once decompressed."""
    return _env_limit("OVRNN_MAX_INPUT_BYTES", 2 << 30)


def max_ir_layers() -> int:
    """Layers (counted before parsing) in an IR that `run` and `inspect` read: parsing takes ~4 kB
    of memory per layer (1e6 layers: 3.9 GB)."""
    return _env_limit("OVRNN_MAX_IR_LAYERS", 300_000)


def max_ir_bytes() -> int:
    """The estimated size of the IR XML a conversion would write (checked before lowering)."""
    return _env_limit("OVRNN_MAX_IR_BYTES", 1 << 30)


def check_input_size(shape, itemsize: int, what: str) -> None:
    """An array about to be made: its dims (check_dims) and its bytes (max_input_bytes)."""
    check_dims(shape, what)
    nbytes = itemsize
    for d in shape:
        nbytes *= d
    limit = max_input_bytes()
    if nbytes > limit:
        raise UsageError(
            f"{what}: shape {list(shape)} is {nbytes:,} bytes, more than the limit of {limit:,}; raise it with "
            "OVRNN_MAX_INPUT_BYTES=<bytes>"
        )
