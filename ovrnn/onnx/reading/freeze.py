"""Frozen inputs: ``--input "sr->16000"`` makes a graph input a constant, as Model Optimizer did.

Syntax (one entry of ``--input``, combinable with shapes in one comma list)::

    NAME[->VALUE]  NAME[SHAPE]{TYPE}->VALUE   e.g. sr->16000, sr[]{i64}->16000, mask[3]{i32}->[1 0 1]

VALUE is a number, ``true``/``false``, or a bracketed list (spaces or commas between elements,
nested brackets for more dims). From Python, ``input=`` takes the same strings or
``InputCutInfo(name, shape, type, value)`` (ours, OpenVINO's, or a 4-tuple in that order).

The value must fit the input as the model declares it: its type (an integer input takes integral
values in range, a bool input 0/1/true/false) and its shape (a flat list is laid out in the given
or declared shape when the element counts agree). The input then becomes an initializer and leaves
the graph's inputs, so everything it decides (an ``If`` on ``Equal(sr, 16000)``) folds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ...dtypes import onnx_type_name
from ...errors import UsageError, flag
from ...shapes import Shape, _split_top_level, parse_input_specs, shape_text


class InputCutInfo(NamedTuple):
    """One input as ``ov.convert_model(input=[...])`` takes it: a name, and optionally a shape, an
    element type and a value that freezes the input."""

    name: str
    shape: object = None
    type: object = None
    value: object = None


@dataclass(frozen=True)
class FrozenInput:
    """An input to freeze, as given: values not yet checked against the model."""

    name: str
    spec: str  # as written on the command line, or rendered in that syntax from a Python form
    shape: Shape | None  # given in brackets
    type: int | None  # TensorProto type given in braces
    value: object  # nested lists of text tokens (CLI) or any array-like (Python); None: type check only
    text: bool = False  # value is the command line's text


@dataclass(frozen=True)
class Frozen:
    """An input that was frozen: its name and its value, in the declared type and shape."""

    name: str
    value: np.ndarray

    def describe(self) -> str:
        """'int64 [] 16000', 'int32 [3] [1 0 1]' (long values abridged)."""
        body = np.array2string(self.value, threshold=16, separator=" ", max_line_width=10**6).replace("\n", "")
        return f"{onnx_type_name(helper.np_dtype_to_tensor_dtype(self.value.dtype))} {list(self.value.shape)} {body}"


# --- type names ---------------------------------------------------------------------------------

_TYPE_NAMES = {
    TensorProto.FLOAT: ("f32", "float", "float32"),
    TensorProto.FLOAT16: ("f16", "float16", "half"),
    TensorProto.DOUBLE: ("f64", "double", "float64"),
    TensorProto.BFLOAT16: ("bf16", "bfloat16"),
    TensorProto.INT8: ("i8", "int8"),
    TensorProto.INT16: ("i16", "int16"),
    TensorProto.INT32: ("i32", "int32"),
    TensorProto.INT64: ("i64", "int64"),
    TensorProto.UINT8: ("u8", "uint8"),
    TensorProto.UINT16: ("u16", "uint16"),
    TensorProto.UINT32: ("u32", "uint32"),
    TensorProto.UINT64: ("u64", "uint64"),
    TensorProto.BOOL: ("boolean", "bool"),
}
_BY_TYPE_NAME = {n: t for t, names in _TYPE_NAMES.items() for n in names}


def _type_from_text(text: str, spec: str) -> int:
    t = _BY_TYPE_NAME.get(text.strip().lower())
    if t is None:
        known = ", ".join(names[0] for names in _TYPE_NAMES.values())
        raise UsageError(f"{flag('input')} '{spec}': unknown element type '{text.strip()}' (expected one of {known})")
    return t


def _type_from_python(value: object, spec: str) -> int | None:
    """ov.Type, numpy dtype or type, 'i64'/'int64', or int/float/bool -> TensorProto type."""
    if value is None:
        return None
    if isinstance(value, str):
        return _type_from_text(value, spec)
    if value is bool:
        return TensorProto.BOOL
    if value is int:
        return TensorProto.INT64
    if value is float:
        return TensorProto.FLOAT
    if hasattr(value, "get_type_name"):  # ov.Type
        return _type_from_text(value.get_type_name(), spec)
    try:
        return helper.np_dtype_to_tensor_dtype(np.dtype(value))
    except (TypeError, KeyError, ValueError):
        raise UsageError(f"{flag('input')} '{spec}': cannot read {value!r} as an element type") from None


def type_text(t: int) -> str:
    return _TYPE_NAMES.get(t, (onnx_type_name(t),))[0]


# --- reading the forms --------------------------------------------------------------------------

_ITEM = re.compile(r"^(?P<name>[^\[\]{}]*?)\s*(?:\[(?P<shape>[^\]]*)\])?\s*(?:\{(?P<type>[^}]*)\})?\s*(?:->\s*(?P<value>.*?))?\s*$", re.S)


def split_frozen(value: object) -> tuple[object, list[FrozenInput]]:
    """(the ``input`` value without its frozen entries, for the shape parser; the frozen entries).
    Entries that only give a type (``x{f32}``) come back as frozen entries without a value, so
    the type is checked too."""
    if value is None:
        return None, []
    if isinstance(value, str):
        return _split_text([value])
    if _is_cut_info(value):
        value = [value]
    if isinstance(value, Mapping):
        rest, frozen = {}, []
        for name, item in value.items():
            if _is_cut_info(item):
                shape_part, entry = _from_cut_info(item, str(name))
                if entry is not None:
                    frozen.append(entry)
                if entry is None or entry.value is None:
                    rest[str(name)] = shape_part[1]
            else:
                rest[name] = item
        return rest, frozen
    if isinstance(value, (list, tuple)) and not _looks_like_shape(value):
        rest_items: list = []
        frozen = []
        strings = [v for v in value if isinstance(v, str)]
        if strings:
            text_rest, text_frozen = _split_text(strings)
            frozen += text_frozen
            rest_items += [text_rest] if text_rest else []
        for item in value:
            if isinstance(item, str):
                continue
            if _is_cut_info(item):
                shape_part, entry = _from_cut_info(item, None)
                if entry is not None:
                    frozen.append(entry)
                if entry is None or entry.value is None:
                    rest_items.append(shape_part)
            else:
                rest_items.append(item)
        return rest_items, frozen
    return value, []


def _looks_like_shape(value) -> bool:
    return all(d is None or (isinstance(d, int) and not isinstance(d, bool)) or hasattr(d, "get_min_length") for d in value)


def _is_cut_info(item: object) -> bool:
    """OpenVINO's or ovrnn's InputCutInfo (fields name, shape, type, value), or a 4-tuple."""
    if all(hasattr(item, f) for f in ("name", "shape", "type", "value")) and not isinstance(item, Mapping):
        return True
    return isinstance(item, tuple) and len(item) == 4 and isinstance(item[0], str)


def _from_cut_info(item, name: str | None) -> tuple[tuple, FrozenInput | None]:
    if hasattr(item, "value") and hasattr(item, "name"):
        n, shape, etype, value = item.name, item.shape, item.type, item.value
    else:
        n, shape, etype, value = item
    n = n if n is not None else name
    if name is not None and n != name:
        raise UsageError(f"{flag('input')}: key '{name}' holds an InputCutInfo named '{n}'")
    spec = render(n, shape, etype, value)
    if not isinstance(n, str) or not n:
        raise UsageError(f"{flag('input')} '{spec}': a frozen input needs its name")
    if value is None and etype is None:
        return (n, shape), None
    from ...shapes import shape_of as _shape_of  # the shape forms ov.convert_model takes

    given = None if shape is None else _shape_of(shape, n)
    return (n, shape), FrozenInput(n, spec, given, _type_from_python(etype, spec), value)


def render(name, shape, etype, value) -> str:
    """A Python form written in the command line's syntax, for messages and rerun commands."""
    text = name or ""
    if shape is not None:
        dims = list(shape) if not hasattr(shape, "rank") else [str(d) for d in shape]
        text += "[" + ",".join("?" if d is None or d == -1 else str(d) for d in dims) + "]"
    if etype is not None:
        try:
            text += "{" + type_text(_type_from_python(etype, text)) + "}"
        except UsageError:
            text += "{" + str(etype) + "}"
    if value is not None:
        text += "->" + _value_text(value)
    return text


def _value_text(value) -> str:
    try:
        array = np.asarray(value)
    except Exception:  # noqa: BLE001 - shown as Python writes it
        return repr(value)
    if array.ndim == 0:
        return str(array.item()).lower() if array.dtype == bool else str(array.item())
    return np.array2string(array, separator=" ", threshold=16, max_line_width=10**6).replace("\n", "")


def _split_text(specs: list[str]) -> tuple[str | None, list[FrozenInput]]:
    rest: list[str] = []
    frozen: list[FrozenInput] = []
    for spec in specs:
        for item in _split_top_level(spec):
            text = item.strip()
            if "->" not in text and "{" not in text:
                rest.append(item)
                continue
            m = _ITEM.match(text)
            if not m or m.group("value") == "" or (m.group("value") is not None and "->" in m.group("value")):
                raise UsageError(
                    f'{flag("input")} \'{text}\': expected NAME[SHAPE]{{TYPE}}->VALUE, for example "sr->16000" or "mask[3]{{i32}}->[1 0 1]"'
                )
            name = m.group("name").strip()
            if not name:
                raise UsageError(f"{flag('input')} '{text}': a frozen input needs its name, as in \"sr->16000\"")
            shape = None
            if m.group("shape") is not None:
                shape = parse_input_specs([f"{name}[{m.group('shape')}]"])[name]
                if shape and not all(d.is_static for d in shape):
                    raise UsageError(f"{flag('input')} '{text}': a frozen input's shape must be static")
            etype = _type_from_text(m.group("type"), text) if m.group("type") is not None else None
            value = _parse_value(m.group("value"), text) if m.group("value") is not None else None
            if value is None and shape is not None:
                rest.append(f"{name}[{m.group('shape')}]")
            frozen.append(FrozenInput(name, text, shape, etype, value, text=True))
    return (",".join(rest) if rest else None), frozen


def _parse_value(text: str, spec: str):
    """'16000' -> '16000'; '[1 0 1]' / '[1,0,1]' -> ['1','0','1']; '[[1 2] [3 4]]' -> nested."""
    tokens = re.findall(r"\[|\]|[^\s,\[\]]+", text)
    if not tokens:
        raise UsageError(f"{flag('input')} '{spec}': no value after '->'")
    pos = 0

    def parse():
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok == "]":
            raise UsageError(f"{flag('input')} '{spec}': unbalanced ']' in the value")
        if tok != "[":
            return tok
        items = []
        while pos < len(tokens) and tokens[pos] != "]":
            items.append(parse())
        if pos >= len(tokens):
            raise UsageError(f"{flag('input')} '{spec}': missing ']' in the value")
        pos += 1
        return items

    value = parse()
    if pos != len(tokens):
        raise UsageError(f"{flag('input')} '{spec}': expected one value or one bracketed list after '->', got '{text}'")
    return value


# --- freezing -----------------------------------------------------------------------------------


def _declared(vi: onnx.ValueInfoProto) -> tuple[int | None, Shape | None]:
    from .read import _shape_of

    return _shape_of(vi)


def freeze_inputs(model: onnx.ModelProto, entries: list[FrozenInput]) -> tuple[onnx.ModelProto, tuple[Frozen, ...]]:
    """The model with each entry's input turned into an initializer (a copy; the caller's model is
    not changed), and what was frozen. Entries without a value only check the type.

    Precondition, checked (else one UsageError): the name is a graph input that is not an
    initializer, given once; it is a tensor (or undeclared), not a sequence/map/optional; the
    given type is the declared one; the value converts to that type without changing (integral and
    in range for an integer, 0/1 for a bool) and fits the declared shape (or the given one, which
    must fit the declared). Then the initializer holds exactly the value every run would feed."""
    if not entries:
        return model, ()
    graph = model.graph
    constants = {t.name for t in graph.initializer} | {o for n in graph.node if n.op_type == "Constant" for o in n.output}
    inputs = {vi.name: vi for vi in graph.input if vi.name not in constants}
    seen: set[str] = set()
    frozen: list[Frozen] = []
    for entry in entries:
        if entry.name in seen:
            raise UsageError(f"{flag('input')}: input '{entry.name}' is given twice")
        seen.add(entry.name)
        if entry.name in constants:
            raise UsageError(f"{flag('input')} '{entry.spec}': '{entry.name}' is an initializer (constant), not a graph input")
        vi = inputs.get(entry.name)
        if vi is None:
            known = ", ".join(inputs) or "none"
            raise UsageError(f"{flag('input')} '{entry.spec}': the model has no input '{entry.name}' (inputs: {known})")
        kind = vi.type.WhichOneof("value")
        if kind not in (None, "tensor_type"):  # a sequence, map or optional: no tensor value stands for it
            raise UsageError(
                f"{flag('input')} '{entry.spec}': input '{entry.name}' is declared a {kind.removesuffix('_type')}, not a tensor; "
                "only a tensor input can be frozen"
            )
        etype, shape = _declared(vi)
        declared = f"input '{entry.name}' is declared {onnx_type_name(etype) if etype else 'without a type'} {shape_text(shape)}"
        target_type = etype or entry.type
        if entry.type is not None and etype and entry.type != etype:
            raise UsageError(f"{flag('input')} '{entry.spec}': type {type_text(entry.type)} given, but {declared}")
        if entry.value is None:
            continue
        if entry.shape is not None and shape is not None and not _fits(entry.shape, shape):
            raise UsageError(f"{flag('input')} '{entry.spec}': shape {shape_text(entry.shape)} given, but {declared}")
        array = _typed(entry, target_type, declared)
        frozen.append(Frozen(entry.name, _shaped(entry, array, shape, declared)))
    if not frozen:
        return model, ()
    out = onnx.ModelProto()
    out.CopyFrom(model)
    names = {f.name for f in frozen}
    kept = [vi for vi in out.graph.input if vi.name not in names]
    del out.graph.input[:]
    out.graph.input.extend(kept)
    out.graph.initializer.extend(numpy_helper.from_array(f.value, f.name) for f in frozen)
    if out.ir_version < 4:  # IR 3 lists every initializer among the inputs
        out.ir_version = 4
    return out, tuple(frozen)


def _fits(given: Shape, declared: Shape) -> bool:
    return len(given) == len(declared) and all(g.merge(d) is not None for g, d in zip(given, declared))


def _typed(entry: FrozenInput, etype: int | None, declared: str) -> np.ndarray:
    """The value as an array of the input's type; refused when a value would change in the cast."""
    if etype is None:
        raise UsageError(f"{flag('input')} '{entry.spec}': give the element type, as in \"{entry.name}{{f32}}->...\"; {declared}")
    try:
        dtype = helper.tensor_dtype_to_np_dtype(etype)
    except KeyError:
        raise UsageError(f"{flag('input')} '{entry.spec}': cannot freeze an input of type {onnx_type_name(etype)}") from None
    flat, shape = _elements(entry)
    values = []
    for item in flat:
        v = _scalar(item, dtype)
        if v is None:
            shown = item if isinstance(item, str) else _value_text(item)
            raise UsageError(f"{flag('input')} '{entry.spec}': value {shown} does not fit {onnx_type_name(etype)}; {declared}")
        values.append(v)
    return np.array(values, dtype=dtype).reshape(shape)


def _elements(entry: FrozenInput) -> tuple[list, tuple[int, ...]]:
    """(the value's elements in order, its shape): from the command line's nested text lists, or
    from any array-like."""
    raw = entry.value
    if entry.text:

        def shape_of(x) -> tuple[int, ...]:
            if isinstance(x, str):
                return ()
            inner = {shape_of(y) for y in x}
            if len(inner) > 1:
                raise UsageError(f"{flag('input')} '{entry.spec}': the value's nested lists differ in length")
            return (len(x), *(inner.pop() if inner else ()))

        def flat(x) -> list:
            return [x] if isinstance(x, str) else [z for y in x for z in flat(y)]

        return flat(raw), shape_of(raw)
    try:
        array = np.asarray(raw, dtype=object) if not isinstance(raw, np.ndarray) else raw
    except ValueError:
        raise UsageError(f"{flag('input')} '{entry.spec}': the value's nested lists differ in length") from None
    if array.dtype == object and any(isinstance(x, (list, tuple)) for x in array.reshape(-1)):
        raise UsageError(f"{flag('input')} '{entry.spec}': the value's nested lists differ in length")
    return list(array.reshape(-1)), array.shape


_BOOL_TEXT = {"true": True, "false": False, "1": True, "0": False}


def _scalar(item, dtype: np.dtype):
    """`item` (text or a Python/numpy scalar) as a value of `dtype`, or None when it does not fit."""
    if isinstance(item, str):
        text = item.strip()
        if dtype == np.bool_:
            return _BOOL_TEXT.get(text.lower())
        try:
            number = int(text) if re.fullmatch(r"[+-]?\d+", text) else float(text)
        except ValueError:
            return None
    else:
        number = item.item() if hasattr(item, "item") else item
    if dtype == np.bool_:
        return bool(number) if isinstance(number, (bool, int, float)) and number in (0, 1) else None
    if isinstance(number, bool):
        number = int(number)
    if not isinstance(number, (int, float)):
        return None
    if np.issubdtype(dtype, np.integer):
        if isinstance(number, float):
            if not np.isfinite(number) or number != int(number):
                return None
            number = int(number)
        info = np.iinfo(dtype)
        return number if info.min <= number <= info.max else None
    value = np.array(number, dtype=np.float64).astype(dtype) if dtype != np.float64 else np.float64(number)
    if np.isfinite(number) and not np.isfinite(value):
        return None  # overflows the type
    return value


def _shaped(entry: FrozenInput, array: np.ndarray, declared_shape: Shape | None, declared: str) -> np.ndarray:
    """The value laid out in the given or declared shape (a flat list of the same element count)."""
    if entry.shape is not None:
        target = tuple(d.lo for d in entry.shape)
        source = f"shape {shape_text(entry.shape)} given"
    elif declared_shape is not None and all(d.is_static for d in declared_shape):
        target = tuple(d.lo for d in declared_shape)
        source = None
    else:
        target = array.shape
        source = None
    if int(np.prod(target, dtype=np.int64)) != array.size:
        against = f"does not fit {source}; {declared}" if source else f"does not fit {declared.replace(' is declared', ', declared')}"
        raise UsageError(f"{flag('input')} '{entry.spec}': value of shape {list(array.shape)} {against}")
    array = array.reshape(target)
    if declared_shape is not None and (
        len(declared_shape) != array.ndim or any(d.merge(_static(n)) is None for d, n in zip(declared_shape, array.shape))
    ):
        raise UsageError(
            f"{flag('input')} '{entry.spec}': value of shape {list(array.shape)} "
            f"does not fit {declared.replace(' is declared', ', declared')}"
        )
    return array


def _static(n: int):
    from ...shapes import Dim

    return Dim.of(n)


def record_text(frozen: tuple[Frozen, ...]) -> dict[str, str]:
    """rt_info ``ovrnn/frozen_inputs``: {name: 'int64 [] 16000'}."""
    return {f.name: f.describe() for f in frozen}


def check_not_frozen_twice(frozen: list[FrozenInput], shaped_names: set[str]) -> None:
    for entry in frozen:
        if entry.value is not None and entry.name in shaped_names:
            raise UsageError(f"{flag('input')}: input '{entry.name}' is given twice")
