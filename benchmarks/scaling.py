"""How the loader's rate grows with its threads: ImageNet-train and val
images/s with 1, 2, 4, ... threads, on the CPU.

Usage::

    python benchmarks/scaling.py DATASET [--threads 1 2 4 8 16] [--pipelines train val] [--rounds 3]
                                 [--seconds 2] [--batch-size 256] [--direct] [--json PATH]

DATASET is a folder written by ``benchmarks/gpu_data.py`` (its
``data.slip``).  For each pipeline and thread count a loader is built with
``num_threads=N`` (``train``: ``presets.imagenet_train(224)``, ``val``:
``presets.imagenet_val(224)``, float16 NCHW and the labels, order random)
and run for two warm-up batches, then timed until ``--seconds``
have passed, the page cache warm.  Rounds interleave every pipeline and
thread count, alternating their order; the table gives medians and ranges,
the speed-up over one thread, the efficiency (speed-up / threads) and the
cores the process kept busy (its CPU time over the wall time: well under
the thread count means threads wait, for the loader's serial work or for
each other; near it with a low efficiency means each image costs more CPU
with more threads, e.g. memory bandwidth).  ``--direct`` also times the
compiled pipeline called without the loader around it.  On a
2-core machine timings drift 10-40% from run to run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import numpy as np

import slipstream as ss
from slipstream.ops import presets
from common import record, summary, time_loader  # noqa: E402  (benchmarks/, next to this file)

PIPELINES = {"train": presets.imagenet_train, "val": presets.imagenet_val}


def measure(path: Path, pipeline: str, threads: int, batch_size: int, seconds: float) -> dict[str, float]:
    """Images/s of one loader of ``threads`` threads over the batches taken
    after its warm-up until ``seconds`` have passed, and the cores the
    process kept busy meanwhile (its CPU time over the wall time)."""
    loader = ss.Loader(path, batch_size, PIPELINES[pipeline](224), order=ss.Order("random", seed=threads),
                       num_threads=threads, verbose=False)
    try:
        return _rates(*time_loader(loader, seconds, warmup=min(2, len(loader) - 1)))
    finally:
        loader.close()


def measure_direct(path: Path, pipeline: str, threads: int, batch_size: int, seconds: float) -> dict[str, float]:
    """The same, calling the loader's compiled pipeline directly from this
    thread on random batches: the decode and augmentation alone, without
    the loader's thread, queue and per-batch checks.  What the loader loses
    against it is the loader's own serial work."""
    loader = ss.Loader(path, batch_size, PIPELINES[pipeline](224), num_threads=threads, verbose=False)
    try:
        numba.set_num_threads(threads)
        rng = np.random.default_rng(threads)
        size = len(ss.Reader(path))
        batches = (np.sort(rng.choice(size, batch_size, replace=False)) for _ in iter(int, 1))
        for _ in range(2):
            loader.compiled(next(batches))
        start, cpu, count = time.perf_counter(), time.process_time(), 0
        while time.perf_counter() - start < seconds or count == 0:
            loader.compiled(next(batches))
            count += batch_size
        return _rates(count, time.perf_counter() - start, time.process_time() - cpu)
    finally:
        loader.close()


def _rates(count: int, wall: float, cpu: float) -> dict[str, float]:
    return {"images_per_s": count / wall, "busy_cores": cpu / wall}


MODES = {"loader": measure, "direct": measure_direct}


def run(path: Path, threads: list[int], pipelines: list[str], rounds: int, seconds: float, batch_size: int,
        direct: bool = False, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every (pipeline, mode, threads) ``rounds`` times, interleaved; the report."""
    if max(threads) > numba.config.NUMBA_NUM_THREADS:
        raise SystemExit(f"{max(threads)} threads asked for, but the loader runs at most "
                         f"{numba.config.NUMBA_NUM_THREADS} (NUMBA_NUM_THREADS)")
    modes = ["loader", "direct"] if direct else ["loader"]
    plan = [(p, m, t) for p in pipelines for m in modes for t in threads]
    runs: dict[str, dict[int, list[dict[str, float]]]] = {}
    for round_ in range(rounds):
        for pipeline, mode, n in (plan if round_ % 2 == 0 else plan[::-1]):
            got = MODES[mode](path, pipeline, n, batch_size, seconds)
            row = pipeline + ("" if mode == "loader" else f" ({mode})")
            runs.setdefault(row, {t: [] for t in threads})[n].append(got)
            log(f"round {round_ + 1}/{rounds} {row}, {n} threads: {got['images_per_s']:,.0f} images/s, "
                f"{got['busy_cores']:.1f} cores busy")
    table: dict[str, Any] = {}
    for row, by_threads in runs.items():
        one = statistics.median(r["images_per_s"] for r in by_threads[min(threads)])
        table[row] = {}
        for n, measured in by_threads.items():
            values = [r["images_per_s"] for r in measured]
            median = statistics.median(values)
            table[row][str(n)] = {"images_per_s": median, "min": min(values), "max": max(values), "runs": values,
                                  "busy_cores": statistics.median(r["busy_cores"] for r in measured),
                                  "speedup": median / one, "efficiency": median / one / (n / min(threads))}
    return {"dataset": str(path), "images": len(ss.Reader(path)), "batch_size": batch_size, "rounds": rounds,
            "seconds_per_measurement": seconds, "threads": threads, "pipelines": table}


def print_table(result: dict[str, Any]) -> None:
    print(f"\n{result['images']:,} images, batch {result['batch_size']}, images/s median [range] of "
          f"{result['rounds']} rounds, {result['seconds_per_measurement']} s each")
    print(f"{'pipeline':<14} {'threads':>7} {'images/s':>26} {'speed-up':>9} {'efficiency':>10} {'busy cores':>10}")
    for pipeline, rows in result["pipelines"].items():
        for n, row in rows.items():
            print(f"{pipeline:<14} {n:>7} {summary(row['runs']):>26} {row['speedup']:>8.2f}x "
                  f"{100 * row['efficiency']:>9.0f}% {row['busy_cores']:>10.1f}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path, help="a folder written by benchmarks/gpu_data.py")
    parser.add_argument("--threads", type=int, nargs="+", default=None,
                        help="thread counts (default: 1, 2, 4, ... up to the cores)")
    parser.add_argument("--pipelines", nargs="+", default=list(PIPELINES), choices=list(PIPELINES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per measurement")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--direct", action="store_true",
                        help="also time the compiled pipeline called directly, without the loader around it")
    parser.add_argument("--json", type=Path, default=None, help="output JSON (default: benchmarks/results/)")
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    threads = args.threads or [2 ** k for k in range(cores.bit_length()) if 2 ** k <= cores]
    result = run(args.dataset / "data.slip", threads, args.pipelines, args.rounds, args.seconds, args.batch_size,
                 args.direct)
    print_table(result)
    print(f"wrote {record(result, 'scaling', args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
