"""How much faster perfectly parallel JPEG decoding gets with every core of
this machine: the ceiling for any loader's 1-thread to all-threads scaling.

Usage::

    python benchmarks/ceiling.py [IMAGE_DIR] [--seconds S] [--json PATH]

Each worker is a separate process (no GIL, no shared queue, no
synchronisation between them) that decodes the same JPEG bytes, held in its
own memory, with ``slipstream.native.jpeg_decode`` (libjpeg-turbo, full
image) in a loop.  First one worker runs alone; then ``os.cpu_count()``
workers run at once.  The ratio of the aggregate images/s is what the
hardware gives: on a machine whose cores share execution units (SMT
siblings) or whose virtual CPUs are over-committed, it is well below the
number of cores, and no loader can scale past it.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_FOLDER = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "imagenet-sample"


def _jpegs(folder: Path, limit: int = 64) -> list[bytes]:
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in (".jpg", ".jpeg"))[:limit]
    if not files:
        raise SystemExit(f"no JPEG files in {folder}")
    return [p.read_bytes() for p in files]


def _worker(folder: Path, seconds: float, start: Any, result: Any) -> None:
    from slipstream import native

    images = _jpegs(folder)
    for data in images[:4]:  # page in the code and the allocator before the clock starts
        native.jpeg_decode(data)
    start.wait()
    decoded, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        for data in images:
            native.jpeg_decode(data)
        decoded += len(images)
    result.put(decoded / (time.perf_counter() - began))


def aggregate_rate(folder: Path, workers: int, seconds: float) -> float:
    """Images/s summed over ``workers`` processes decoding at the same time."""
    ctx = mp.get_context("spawn")
    start, result = ctx.Barrier(workers + 1), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(folder, seconds, start, result)) for _ in range(workers)]
    for p in procs:
        p.start()
    start.wait()
    rates = [result.get(timeout=seconds * 10 + 60) for _ in procs]
    for p in procs:
        p.join()
    return sum(rates)


def measure(folder: Path, seconds: float = 4.0, repeats: int = 3) -> dict[str, Any]:
    """Median of ``repeats`` alternating 1-process and all-process runs."""
    cores = os.cpu_count() or 1
    one, all_cores = [], []
    for _ in range(repeats):
        one.append(aggregate_rate(folder, 1, seconds))
        all_cores.append(aggregate_rate(folder, cores, seconds))
    return {"cores": cores, "one_process": one, "all_processes": all_cores,
            "ratio": statistics.median(all_cores) / statistics.median(one)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER)
    parser.add_argument("--seconds", type=float, default=4.0, help="decoding time per run (default 4)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    figures = measure(args.folder, args.seconds)
    print(f"{'processes':>10} {'images/s (median)':>18}")
    print(f"{1:>10} {statistics.median(figures['one_process']):>18,.0f}")
    print(f"{figures['cores']:>10} {statistics.median(figures['all_processes']):>18,.0f}")
    print(f"ceiling for 1 -> {figures['cores']} thread scaling: {figures['ratio']:.2f}x")
    if args.json:
        from common import write_json

        write_json(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main(sys.argv[1:]))
