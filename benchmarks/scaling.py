"""How the loader's rate grows with its threads: ImageNet-train and val
images/s with 1, 2, 4, ... threads, on the CPU.

Usage::

    python benchmarks/scaling.py DATASET [--threads 1 2 4 8 16] [--pipelines train val] [--rounds 3]
                                 [--seconds 2] [--batch-size 256] [--json PATH]

DATASET is a folder written by ``benchmarks/gpu_data.py`` (its
``data.slip``).  For each pipeline and thread count a loader is built with
``num_threads=N`` (``train``: ``presets.imagenet_train(224)``, ``val``:
``presets.imagenet_val(224)``, float16 NCHW and the labels, order random)
and run for two warm-up batches, then timed until ``--seconds``
have passed, the page cache warm.  Rounds interleave every pipeline and
thread count, alternating their order; the table gives medians and ranges,
the speed-up over one thread and the efficiency (speed-up / threads).  On a
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

import slipstream as ss
from slipstream.ops import presets
from common import record, summary  # noqa: E402  (benchmarks/, next to this file)

PIPELINES = {"train": presets.imagenet_train, "val": presets.imagenet_val}


def measure(path: Path, pipeline: str, threads: int, batch_size: int, seconds: float) -> float:
    """Images/s of one loader of ``threads`` threads over the batches taken
    after its warm-up until ``seconds`` have passed."""
    loader = ss.Loader(path, batch_size, PIPELINES[pipeline](224), order=ss.Order("random", seed=threads),
                       num_threads=threads, verbose=False)
    try:
        batches = iter(loader)
        for _ in range(min(2, len(loader) - 1)):  # warm-up: compilation, the thread pool, the first pages
            next(batches)
        start, count = time.perf_counter(), 0
        while time.perf_counter() - start < seconds or count == 0:
            for _images, labels in batches:
                count += labels.shape[0]
                if time.perf_counter() - start >= seconds:
                    break
            else:
                batches = iter(loader)
        return count / (time.perf_counter() - start)
    finally:
        loader.close()


def run(path: Path, threads: list[int], pipelines: list[str], rounds: int, seconds: float, batch_size: int,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every (pipeline, threads) ``rounds`` times, interleaved; the report."""
    if max(threads) > numba.config.NUMBA_NUM_THREADS:
        raise SystemExit(f"{max(threads)} threads asked for, but Numba has {numba.config.NUMBA_NUM_THREADS} "
                         f"(NUMBA_NUM_THREADS)")
    plan = [(p, t) for p in pipelines for t in threads]
    rates: dict[str, dict[int, list[float]]] = {p: {t: [] for t in threads} for p in pipelines}
    for round_ in range(rounds):
        for pipeline, n in (plan if round_ % 2 == 0 else plan[::-1]):
            rate = measure(path, pipeline, n, batch_size, seconds)
            rates[pipeline][n].append(rate)
            log(f"round {round_ + 1}/{rounds} {pipeline}, {n} threads: {rate:,.0f} images/s")
    table: dict[str, Any] = {}
    for pipeline, by_threads in rates.items():
        one = statistics.median(by_threads[min(threads)])
        table[pipeline] = {
            str(n): {"images_per_s": statistics.median(values), "min": min(values), "max": max(values),
                     "runs": values, "speedup": statistics.median(values) / one,
                     "efficiency": statistics.median(values) / one / (n / min(threads))}
            for n, values in by_threads.items()}
    return {"dataset": str(path), "images": len(ss.Reader(path)), "batch_size": batch_size, "rounds": rounds,
            "seconds_per_measurement": seconds, "threads": threads, "pipelines": table,
            "threading_layer": _threading_layer()}


def _threading_layer() -> str | None:
    try:
        return numba.threading_layer()
    except ValueError:  # no parallel code ran in this process
        return None


def print_table(result: dict[str, Any]) -> None:
    print(f"\n{result['images']:,} images, batch {result['batch_size']}, images/s median [range] of "
          f"{result['rounds']} rounds, {result['seconds_per_measurement']} s each, "
          f"threading layer {result['threading_layer']}")
    print(f"{'pipeline':<8} {'threads':>7} {'images/s':>26} {'speed-up':>9} {'efficiency':>10}")
    for pipeline, rows in result["pipelines"].items():
        for n, row in rows.items():
            print(f"{pipeline:<8} {n:>7} {summary(row['runs']):>26} {row['speedup']:>8.2f}x "
                  f"{100 * row['efficiency']:>9.0f}%")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path, help="a folder written by benchmarks/gpu_data.py")
    parser.add_argument("--threads", type=int, nargs="+", default=None,
                        help="thread counts (default: 1, 2, 4, ... up to the cores)")
    parser.add_argument("--pipelines", nargs="+", default=list(PIPELINES), choices=list(PIPELINES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per measurement")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--json", type=Path, default=None, help="output JSON (default: benchmarks/results/)")
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    threads = args.threads or [2 ** k for k in range(cores.bit_length()) if 2 ** k <= cores]
    result = run(args.dataset / "data.slip", threads, args.pipelines, args.rounds, args.seconds, args.batch_size)
    print_table(result)
    print(f"wrote {record(result, 'scaling', args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
