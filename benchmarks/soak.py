"""Soak: many epochs of a full augmentation pipeline over a generated dataset,
watching what a days-long training run would suffer from: memory that
grows, threads that pile up, throughput that decays.

Per epoch it records the process's resident memory (RSS, after the epoch),
its thread count and the epoch's images/s, prints a table and writes
``benchmarks/results/soak-<date>.json``.  It checks, and exits with status 1
when one fails:

- RSS after the last epoch within 5% of RSS after epoch 5 (the first
  epochs grow the OS page cache's share of the mapping and the allocator's
  pools; after that nothing should grow);
- the same number of threads after every epoch from epoch 5 on (the first
  epochs start the thread pools: Numba's, the page readers');
- throughput steady: the median of the last fifth of the epochs within 15%
  of the median of the epochs from 5 on (the machine's noise is ~10%).

    python benchmarks/soak.py                  # 50 epochs of 2,048 images
    python benchmarks/soak.py --epochs 4 --images 192 --batch-size 32   # the quick version the tests run
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import write_json  # noqa: E402

RSS_TOLERANCE = 0.05
THROUGHPUT_TOLERANCE = 0.15
BASELINE_EPOCH = 5


def process_status() -> dict[str, int]:
    """RSS in bytes and the thread count, from /proc/self/status (all
    threads, native ones included: Numba's, torch's).

    The count is the least of 20 readings 10 ms apart: a joined thread
    (the epoch's, stopped when the epoch ends) leaves the operating system
    a moment after ``join()`` returns, so a single reading sometimes still
    counts it; a leaked thread stays in every reading."""
    def status() -> dict[str, list[str]]:
        fields = {}
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            fields[key] = value.split()
        return fields

    threads = []
    for _ in range(20):
        threads.append(int(status()["Threads"][0]))
        time.sleep(0.01)
    return {"rss": int(status()["VmRSS"][0]) * 1024, "threads": min(threads)}


def pipelines() -> dict[str, list[Any]]:
    """ImageNet training with the usual extras: colour jitter, grayscale,
    solarize, erasing, MixUp with soft labels, float16 NCHW."""
    import numpy as np

    from slipstream.ops import (ColorJitter, MixLabels, MixUp, Normalize, RandomErasing, RandomGrayscale,
                                RandomHorizontalFlip, RandomResizedCrop, RandomSolarize)

    mix = MixUp(alpha=0.2)
    return {"image": [RandomResizedCrop(160), RandomHorizontalFlip(), ColorJitter(0.4, 0.4, 0.4, 0.1),
                      RandomGrayscale(0.2), RandomSolarize(128, 0.2), RandomErasing(0.25), mix,
                      Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225), np.float16)],
            "label": [MixLabels(mix, num_classes=6)]}


def soak(path: Path, epochs: int, batch_size: int) -> list[dict[str, Any]]:
    import slipstream as ss

    rows = []
    with ss.Loader(path, batch_size, pipelines(), order=ss.Order("random", seed=0), verbose=False) as loader:
        for epoch in range(1, epochs + 1):
            start, images = time.perf_counter(), 0
            for batch, _ in loader:
                images += batch.shape[0]
            seconds = time.perf_counter() - start
            rows.append({"epoch": epoch, "images_per_s": images / seconds, "seconds": seconds,
                         "python_threads": threading.active_count(), **process_status()})
            row = rows[-1]
            print(f"{epoch:>5}  {row['images_per_s']:>9,.0f}  {row['rss'] / 2**20:>9,.1f}  {row['threads']:>7}",
                  flush=True)
    return rows


def verdicts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The three checks, each with its figures and whether it holds."""
    first = min(BASELINE_EPOCH, max(1, len(rows) - 1)) - 1  # a short run compares its last two epochs
    base, last = rows[first], rows[-1]
    steady = [r["images_per_s"] for r in rows[first:]]
    tail = steady[-max(1, len(steady) // 5):]
    growth = last["rss"] / base["rss"] - 1
    drift = statistics.median(tail) / statistics.median(steady) - 1
    threads = sorted({r["threads"] for r in rows[first:]})  # the first epochs start the thread pools
    return {
        "rss": {"epoch": base["epoch"], "rss_then": base["rss"], "rss_last": last["rss"], "growth": growth,
                "holds": abs(growth) <= RSS_TOLERANCE},
        "threads": {"from_epoch": base["epoch"], "counts": threads, "all": [r["threads"] for r in rows],
                    "holds": len(threads) == 1},
        "throughput": {"median_steady": statistics.median(steady), "median_last_fifth": statistics.median(tail),
                       "drift": drift, "holds": abs(drift) <= THROUGHPUT_TOLERANCE},
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--images", type=int, default=2048, help="generated images in the dataset")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--out", type=Path, default=None, help="JSON results (default benchmarks/results/soak-<date>.json)")
    args = parser.parse_args(argv)

    import slipstream as ss
    from slipstream.sources import synthetic_folder

    with tempfile.TemporaryDirectory(prefix="slipstream-soak-") as tmp:
        folder = synthetic_folder(Path(tmp) / "images", count=args.images, height=240, width=320, verbose=False)
        path = ss.write(Path(tmp) / "soak.slip", folder, verbose=False).path
        print(f"{args.epochs} epochs of {args.images} generated 240x320 JPEGs, batches of {args.batch_size}")
        print(f"{'epoch':>5}  {'images/s':>9}  {'RSS MiB':>9}  {'threads':>7}")
        rows = soak(path, args.epochs, args.batch_size)
    checks = verdicts(rows)
    rss, threads, speed = checks["rss"], checks["threads"], checks["throughput"]
    print(f"RSS after epoch {rss['epoch']}: {rss['rss_then'] / 2**20:,.1f} MiB, after epoch {rows[-1]['epoch']}: "
          f"{rss['rss_last'] / 2**20:,.1f} MiB ({rss['growth']:+.1%}; limit ±{RSS_TOLERANCE:.0%}): "
          f"{'holds' if rss['holds'] else 'FAILS'}")
    print(f"threads after each epoch: {threads['all']}; from epoch {threads['from_epoch']} on: {threads['counts']}: "
          f"{'holds' if threads['holds'] else 'FAILS'}")
    print(f"images/s: median {speed['median_steady']:,.0f} from epoch {rss['epoch']} on, "
          f"{speed['median_last_fifth']:,.0f} over the last fifth ({speed['drift']:+.1%}; limit "
          f"±{THROUGHPUT_TOLERANCE:.0%}): {'holds' if speed['holds'] else 'FAILS'}")
    out = args.out or HERE / "results" / f"soak-{datetime.date.today().isoformat()}.json"
    write_json(out, {"epochs": rows, "checks": checks, "images": args.images, "batch_size": args.batch_size})
    print(f"wrote {out}")
    return 0 if all(check["holds"] for check in checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
