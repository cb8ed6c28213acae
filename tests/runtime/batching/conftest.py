"""The batcher tests' shared fixtures: silero VAD's stream contract and its bit-exact oracle."""

from __future__ import annotations

import pytest

from ovrnn.runtime.batching import BatchedStep, StreamSpec

from .batcher_models import silero_path, silero_spec_args


@pytest.fixture(scope="module")
def silero_spec():
    """silero VAD as a stream (skips without the silero-vad wheel)."""
    return StreamSpec.of(silero_path(), **silero_spec_args())


@pytest.fixture(scope="module")
def alone(silero_spec):
    """Each stream alone: the same model at batch 1 (the bit-exact oracle; run_alone runs it)."""
    return BatchedStep(silero_spec, sizes=(1,))
