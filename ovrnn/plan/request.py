"""The conversion's options checked: ``Request`` is a ``ConversionOptions`` (plan/options.py, where
each option is declared once) plus what ``checked()`` resolves from them; ``checked()`` checks each
value before the model is read (usage errors first) and resolves stateful and the weight compression."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import UsageError, flag
from ..quantization import DEFAULT_MAX_ERROR, GROUP_SIZES, Compression
from ..quantization import MODES as QUANT_MODES
from .options import IR_VERSIONS, LOWERINGS, ConversionOptions

DEFAULT_CHUNK_STEPS = 64  # steps per cell-chain piece: caps the plugin's passes that are quadratic in a piece's length


@dataclass(frozen=True)
class Request(ConversionOptions):
    """convert_model's options as the caller gave them (every field of ``ConversionOptions``);
    ``checked()`` checks every value (usage errors, before the model is read), resolves ``stateful``
    (True, or the (input, output) pairs that become states) and sets ``compression``. A None
    ``chunk_steps`` is DEFAULT_CHUNK_STEPS, or cpu_forms.PIECE_STEPS where the CPU's forms are measured."""

    compression: Compression | None = None  # checked: from compress_weights, group_size and max_weight_error

    @classmethod
    def of(cls, options: ConversionOptions) -> Request:
        """The request for `options` (every field copied)."""
        return cls(**{f: getattr(options, f) for f in ConversionOptions.__dataclass_fields__})

    def checked(self) -> Request:
        if self.ir_version not in IR_VERSIONS:
            raise UsageError(f"{flag('ir-version')}: expected 10 or 11, got {self.ir_version}")
        if self.lowering not in LOWERINGS:
            raise UsageError(f"{flag('lowering')}: expected fastest, cell, matmul or auto, got '{self.lowering}'")
        check_step_counts(self.chunk_steps, self.max_steps)
        compression = compression_of(self.compress_weights, self.group_size, self.max_weight_error)
        return replace(self, stateful=state_request(self.stateful), compression=compression)


def state_request(value) -> bool | tuple[tuple[str, str], ...]:
    """``stateful=``: False, True (every recurrent node), or IN=OUT pairs ("a=b,c=d" or a list)."""
    if value is None or value is False:
        return False
    if value is True:
        return True
    items = [value] if isinstance(value, str) else list(value)
    if not all(isinstance(v, str) for v in items):
        raise UsageError(f'{flag("stateful")}: expected True or IN=OUT pairs such as "state=stateN", got {value!r}')
    pairs = []
    for text in (p.strip() for v in items for p in v.split(",")):
        if not text:
            continue
        name, sep, out = (t.strip() for t in text.partition("="))
        if not sep or not name or not out:
            raise UsageError(f"{flag('stateful')}: expected IN=OUT pairs such as \"state=stateN\", got '{text}'")
        pairs.append((name, out))
    return tuple(pairs) or True


def check_step_counts(chunk_steps, max_steps) -> None:
    """--chunk-steps and --max-steps, for convert and for ovrnn.extension()."""
    if chunk_steps is not None:
        check_count("chunk-steps", chunk_steps, "0 (one piece) or a positive number of steps")
    if max_steps is not None:
        check_count("max-steps", max_steps, "0 (no limit) or a positive number of steps")


def compression_of(mode: str | None, group_size: int | None, max_error: float | None = None) -> Compression | None:
    """--compress-weights / --group-size / --max-weight-error checked: None when no compression was asked for."""
    if mode is None:
        if group_size is not None:
            raise UsageError(f"{flag('group-size')} applies to {flag('compress-weights', 'int4')} only")
        if max_error is not None:
            raise UsageError(f"{flag('max-weight-error')} applies with {flag('compress-weights')} only")
        return None
    if max_error is not None and (isinstance(max_error, bool) or not isinstance(max_error, (int, float)) or not max_error > 0):
        raise UsageError(f"{flag('max-weight-error')}: expected a positive number (inf: no limit), got {max_error}")
    if mode not in QUANT_MODES:
        raise UsageError(f"{flag('compress-weights')}: expected int8 or int4, got '{mode}'")
    if group_size is not None and mode != "int4":
        raise UsageError(f"{flag('group-size')} applies to {flag('compress-weights', 'int4')} only")
    if group_size is not None and (isinstance(group_size, bool) or group_size not in GROUP_SIZES):
        raise UsageError(f"{flag('group-size')}: expected 32, 64, 128 or -1 (one group per row), got {group_size}")
    return Compression(mode, -1 if group_size is None else group_size, DEFAULT_MAX_ERROR if max_error is None else float(max_error))


def check_count(name: str, value: object, expected: str) -> None:
    """A count option (steps, chunk size) is an int >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"{flag(name)}: expected {expected}, got {value}")
