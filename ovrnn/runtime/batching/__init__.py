"""Many streams at once: a recurrent model's chunks of many streams batched into one call.

* ``StreamSpec``: the stream contract (per-chunk inputs, state pairs, carried context, batch axes).
* ``BatchedStep``: the stateless model compiled at static batch sizes; ``run`` one chunk of n
  streams with their states in and out (what a Ray Serve replica calls).
* ``StreamBatcher`` (``ovrnn.StreamBatcher``): streams opened and fed one chunk at a time; worker
  threads own the compiled sizes and each stream's state (docs/batching.md); ``open_group`` a
  ``StreamGroup`` of streams fed only together, one stacked batch a call. ``processes=True``: each
  worker a process of its own, the same calls (processes.py).
"""

from .batcher import StreamBatcher
from .spec import Context, Port, StatePair, StreamSpec
from .step import DEFAULT_SIZES, BatchedStep
from .store import StateStore
from .stream_group import StreamGroup
from .worker import StreamHandle

__all__ = [
    "DEFAULT_SIZES",
    "BatchedStep",
    "Context",
    "Port",
    "StatePair",
    "StateStore",
    "StreamBatcher",
    "StreamGroup",
    "StreamHandle",
    "StreamSpec",
]
