"""The Loop recovery's differential fuzzer, bigger than the CI run (tests/onnx_graph/test_loop_fuzz.py): seeded
bodies that are a cell and bodies that only look like one (tests/loop_bodies.py), each converted
by ovrnn, run on OpenVINO's CPU at f32 and compared with onnxruntime running the original Loop or
Scan. Prints each body that is wrong, not recovered though it is a cell, or crashed, then a count
per mutation and outcome; exit status 1 if there was any.

    python tools/fuzz_loops.py --count 2000 --seed 7
    python tools/fuzz_loops.py --count 200 --only film,index_term_y --group 1
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from loop_bodies import MUTATIONS, judge, specs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000, help="bodies to build (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sizes, cells and weights (default 0)")
    parser.add_argument("--group", type=int, default=6, help="bodies packed per converted model (default 6)")
    parser.add_argument("--only", default="", help="comma-separated mutations to keep (default: all): " + ", ".join(MUTATIONS))
    args = parser.parse_args(argv)
    only = {m for m in args.only.split(",") if m}
    unknown = only - set(MUTATIONS)
    if unknown:
        parser.error(f"unknown mutation(s): {', '.join(sorted(unknown))}")
    bodies = [s for s in specs(args.count, args.seed) if not only or s.mutation in only]
    start = time.perf_counter()
    outcomes = []
    for k in range(0, len(bodies), args.group):
        outcomes += judge(bodies[k : k + args.group])
    bad = [o for o in outcomes if not o.ok]
    for o in bad:
        print(f"{o.spec.id}: {o.how} {o.detail}")
    table = Counter((o.spec.mutation, o.how) for o in outcomes)
    for mutation in MUTATIONS:
        row = {how: n for (m, how), n in table.items() if m == mutation}
        if row:
            print(
                f"{mutation:22s} {'must recover' if MUTATIONS[mutation].recover else 'not a cell  '}  "
                + "  ".join(f"{how} {n}" for how, n in sorted(row.items()))
            )
    print(
        f"{len(outcomes)} bodies in {time.perf_counter() - start:.0f} s: "
        + ", ".join(f"{how} {n}" for how, n in sorted(Counter(o.how for o in outcomes).items()))
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
