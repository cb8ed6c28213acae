"""Differential fuzzer of the Loop recovery (issue 30): seeded bodies that are a cell and bodies
that only look like one (tests/loop_bodies.py: activation swaps, terms on the iteration number,
on counters and on outer inputs, gating, masks and float tables that are no mask, float64, Scan
axes and directions), each converted by ovrnn, run on OpenVINO's CPU at f32 and compared with
onnxruntime running the original Loop or Scan. Every body is right or refused with one typed
error, never wrong; every body that is still a cell is recovered (a recurrent node made, its Loop
gone), so the fuzzer cannot pass by refusing or unrolling everything.

Bodies are packed GROUP to a model (one conversion, one compilation, one onnxruntime session per
pack); a pack whose conversion is refused is judged body by body. tools/fuzz_loops.py runs more
(--count, --seed)."""

from __future__ import annotations

from collections import Counter

import pytest
from loop_bodies import MUTATIONS, judge, specs

COUNT, SEED, GROUP = 300, 30, 6
SPECS = specs(COUNT, SEED)
GROUPS = [SPECS[k : k + GROUP] for k in range(0, COUNT, GROUP)]


def test_the_mix_has_every_mutation_and_half_of_it_must_be_recovered():
    by_mutation = Counter(s.mutation for s in SPECS)
    assert len(SPECS) >= 300 and set(by_mutation) == set(MUTATIONS)
    must = sum(s.recover for s in SPECS)
    assert must == COUNT // 2, must
    assert {s.cell for s in SPECS if s.recover} == {"lstm", "gru_lbr0", "gru_lbr1", "rnn_tanh", "rnn_relu"}
    assert {(s.scan_axis, s.reverse) for s in SPECS if s.mutation == "scan"} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert len({s.id for s in SPECS}) == COUNT


@pytest.mark.parametrize(
    "group", GROUPS, ids=[f"{k * GROUP:03d}:" + "+".join(f"{s.cell}.{s.mutation}" for s in g) for k, g in enumerate(GROUPS)]
)
def test_every_body_is_right_or_refused_and_every_cell_recovered(group):
    outcomes = judge(group)
    bad = [f"{o.spec.id}: {o.how} {o.detail}" for o in outcomes if not o.ok]
    assert bad == []
    for o in outcomes:  # the counts below: what each mutation came to
        assert (o.how == "recovered") == o.spec.recover or o.how == "refused", f"{o.spec.id}: {o.how} {o.detail}"
