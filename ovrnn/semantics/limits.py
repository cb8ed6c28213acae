"""How many unrolled steps before compiling gets slow: a note, then a refusal.

Measured on OpenVINO 2026.4 CPU (2 cores, hidden 64, chains cut into 64-step pieces): about
0.5 s to compile 512 cells (T=256, bidirectional) and 3 s for 2000 (T=1000, bidirectional); the
cost grows faster than linearly, so some 8000 cells take over half a minute and T=10,000 minutes.
"""

from __future__ import annotations

from ..errors import UsageError, flag
from ..shapes import max_ir_bytes

NOTE_ABOVE = 2048  # unrolled steps (time steps x directions, over all RNN nodes)
DEFAULT_MAX_STEPS = 8192
# The least XML one unrolled step takes (one RNNCell, forward tanh: 1,312 bytes; explicit
# activations, sequence_lens and clip take up to 4.8 kB), and the peak memory per XML byte
# while converting (T=10,000: 169 MiB for 13 MB).
XML_BYTES_PER_STEP = 1_300
MEMORY_PER_XML_BYTE = 13


def check_steps(total: int, nodes: int, max_steps: int | None) -> str | None:
    """None, a note when compiling will take a while, or a UsageError past `max_steps`."""
    limit = DEFAULT_MAX_STEPS if max_steps is None else max_steps
    where = f"{total} steps (time steps x directions, over {nodes} RNN node{'s' if nodes != 1 else ''})"
    estimate, most = total * XML_BYTES_PER_STEP, max_ir_bytes()
    if estimate > most:  # even with --max-steps 0: the IR must fit in memory while it is written
        raise UsageError(
            f"the model unrolls to {where}: its IR would be at least {estimate:,} bytes of XML ({XML_BYTES_PER_STEP:,} per step), "
            f"more than the limit of {most:,}, and writing it needs over {estimate * MEMORY_PER_XML_BYTE / 2**30:.0f} GiB of memory; "
            f"fix a shorter sequence with {flag('input')}, or raise the limit with OVRNN_MAX_IR_BYTES=<bytes>"
        )
    if limit and total > limit:
        raise UsageError(
            f"the model unrolls to {where}, more than {flag('max-steps', limit)}: compiling that many cells takes "
            f"OpenVINO minutes; raise {flag('max-steps')} to convert anyway (0 = no limit), or fix a shorter sequence with {flag('input')}"
        )
    if total > NOTE_ABOVE:
        return (
            f"the model unrolls to {where}: OpenVINO will take a while to compile it (tens of seconds on CPU); {flag('cache-dir')} "
            "makes later compiles faster"
        )
    return None
