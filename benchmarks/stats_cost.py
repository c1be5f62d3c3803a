"""What ``loader.stats()`` costs a batch: its parts timed one by one, then
added up for a batch of the ImageNet training pipeline.

The figures are kept by a reading of the processor's cycle counter before
and after each node's statements in a compiled stage (per sample and
node), ``time.perf_counter()`` pairs around the loader thread's phases and
the training loop's wait (per batch), and a ``torch.profiler`` range around
each wait (per batch).  Whole-loader comparisons (``revisions.py`` against
the tree before the stats) cannot resolve 1% on 2 cores, whose runs drift
by 5-10% from round to round; the parts can be timed exactly.

    python benchmarks/stats_cost.py [--batch 128] [--nodes 2] [--images-per-s 2239]

``--images-per-s``: the pipeline's rate on this machine (default: ImageNet
train's in benchmarks/results/revisions-stats-2026-12-08.json), to express
the cost as a share of a batch.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import record, summary  # noqa: E402

PERF_COUNTER_PAIRS = 7
"""perf_counter pairs per batch: five phases of the loader thread, the wait and the step."""


def per_call(fn, calls: int, rounds: int = 7) -> list[float]:
    """Nanoseconds per call of ``fn(calls)`` (which makes ``calls`` calls), per round."""
    fn(10)
    out = []
    for _ in range(rounds):
        began = time.perf_counter()
        fn(calls)
        out.append((time.perf_counter() - began) / calls * 1e9)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128, help="samples per batch (default 128, as pipelines.py)")
    parser.add_argument("--nodes", type=int, default=2, help="compiled nodes per sample (default 2: decode, label)")
    parser.add_argument("--images-per-s", type=float, default=2239.0,
                        help="the pipeline's rate here (default: ImageNet train, 2,239 images/s)")
    parser.add_argument("--out", type=Path, help="the JSON result (default benchmarks/results/stats-cost-DATE.json)")
    args = parser.parse_args()

    from torch.autograd.profiler import record_function

    from slipstream.compiler.threads import cycles

    ticks = np.zeros((1, 4), np.int64)

    @njit(nogil=True)
    def counted(calls, ticks):
        for k in range(calls):
            started = cycles()
            ticks[0, k & 3] = ticks[0, k & 3] + (cycles() - started)

    @njit(nogil=True)
    def bare(calls, ticks):
        for k in range(calls):
            ticks[0, k & 3] = ticks[0, k & 3] + 1

    def perf_pairs(calls):
        total = 0.0
        for _ in range(calls):
            began = time.perf_counter()
            total += time.perf_counter() - began

    def ranges(calls):
        for _ in range(calls):
            with record_function("slipstream.next"):
                pass

    node = [a - b for a, b in zip(per_call(lambda n: counted(n, ticks), 10_000_000),
                                  per_call(lambda n: bare(n, ticks), 10_000_000))]
    pair = per_call(perf_pairs, 1_000_000)
    profiled = per_call(ranges, 200_000)
    batch_ns = args.batch / args.images_per_s * 1e9
    cost_ns = (args.batch * args.nodes * statistics.median(node) + PERF_COUNTER_PAIRS * statistics.median(pair)
               + statistics.median(profiled))
    rows = {"cycle counter pair around a node (ns)": node, "perf_counter pair (ns)": pair,
            "torch.profiler range, no profiler running (ns)": profiled}
    print(f"{'part':48} {'median [range]':>24}")
    for name, values in rows.items():
        print(f"{name:48} {summary(values, 1):>24}")
    print(f"\nper batch of {args.batch} ({args.nodes} nodes a sample, {PERF_COUNTER_PAIRS} perf_counter pairs, one "
          f"range): {cost_ns / 1000:.1f} us of a {batch_ns / 1e6:.1f} ms batch at {args.images_per_s:,.0f} "
          f"images/s = {cost_ns / batch_ns:.4%}")
    result = {"parts_ns": rows, "batch": args.batch, "nodes": args.nodes, "images_per_s": args.images_per_s,
              "cost_ns_per_batch": cost_ns, "batch_ns": batch_ns, "share": cost_ns / batch_ns}
    print(f"wrote {record(result, 'stats-cost', args.out)}")


if __name__ == "__main__":
    main()
