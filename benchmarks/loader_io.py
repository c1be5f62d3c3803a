"""Raw I/O of the loader: the stored bytes of every image into a batch, no
decoding, with both memory managers.

Usage::

    python benchmarks/loader_io.py [FOLDER] [--gigabytes G] [--json PATH]

The dataset is FOLDER's JPEGs (default ``../shared/data/imagenet-sample``)
repeated until the file holds at least ``--gigabytes`` (default 2), written
once through ``slipstream.cached`` (kept in slipstream's cache folder).  Each
configuration loads one epoch with the page cache dropped first (cold: the
disk; when this process may write ``/proc/sys/vm/drop_caches``) and one more
epoch right after (warm: the page cache), batch 128, all cores.  A batch is
what a training step would receive: a (128, max_size) uint8 tensor with each
image's JPEG bytes at the start of its row (``slipstream.ops.StoredBytes``).

Configurations: the mapped file (``os_cache=True``) in random and
quasi-random order, and the page pool (``os_cache=False``, 256 MiB) in
quasi-random order.  The table gives samples/s and GB/s of stored bytes.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
from datetime import datetime
from pathlib import Path

import numpy as np

import slipstream as ss
from slipstream.sources import find_jpegs
from common import Repeated, write_json  # noqa: E402  (benchmarks/, next to this file)

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = REPO_ROOT.parent / "shared" / "data" / "imagenet-sample"
BATCH = 128
CONFIGS = {
    "mapped, random": {"memory": ss.Memory(os_cache=True), "order": ss.Order("random", seed=0)},
    "mapped, quasi_random": {"memory": ss.Memory(os_cache=True), "order": ss.Order("quasi_random", seed=0)},
    "page pool, quasi_random": {"memory": ss.Memory(os_cache=False), "order": ss.Order("quasi_random", seed=0)},
}


def drop_page_cache(path: Path) -> bool:
    """Evict the file from the page cache: all of it where allowed, else
    just this file (``posix_fadvise``)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
        return True
    except OSError:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        return True


def epoch_rate(loader: ss.Loader, sizes: np.ndarray) -> tuple[float, float]:
    start = time.perf_counter()
    count = stored = 0
    for batch, labels in loader:
        count += len(labels)
        stored += int(sizes[labels.numpy()].sum())
    elapsed = time.perf_counter() - start
    return count / elapsed, stored / elapsed / 1e9


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER, help="folder of JPEGs")
    parser.add_argument("--gigabytes", type=float, default=2.0, help="dataset size to reach (default: 2)")
    parser.add_argument("--json", type=Path, default=None, help="output JSON (default: benchmarks/results/)")
    args = parser.parse_args(argv)
    paths = find_jpegs(args.folder)
    if not paths:
        print(f"no JPEGs under {args.folder}")
        return 1
    per_pass = sum(p.stat().st_size for p in paths)
    times = max(1, int(np.ceil(args.gigabytes * 1e9 / per_pass)))
    fields = {"image": ss.RGBImageField(), "label": ss.IntField()}
    path = ss.cached(Repeated(paths, times), fields, name=f"loader-io-{args.folder.name}-x{times}", version=1)
    reader = ss.Reader(path)
    sizes = reader.metadata["image"]["size"].astype(np.int64)
    print(f"{path}: {len(reader):,} images ({len(paths)} JPEGs x {times}), {path.stat().st_size / 1e9:.2f} GB")

    results = {}
    for name, config in CONFIGS.items():
        loader = ss.Loader(reader, BATCH, {"image": [ss.ops.StoredBytes(int(sizes.max()))]}, **config)
        warm_up = iter(loader)
        next(warm_up)  # compiles before timing
        warm_up.close()
        dropped = drop_page_cache(path)
        cold = epoch_rate(loader, sizes)
        warm = epoch_rate(loader, sizes)
        results[name] = {"cold": {"samples_per_s": cold[0], "gb_per_s": cold[1]},
                         "warm": {"samples_per_s": warm[0], "gb_per_s": warm[1]}, "page_cache_dropped": dropped}
        if not config["memory"].os_cache:
            results[name]["pool_pages"] = loader.memory.store.capacity
            results[name]["peak_pages_in_use"] = loader.memory.store.peak_in_use
        loader.close()

    print(f"batch {BATCH}, {os.cpu_count()} cores; cold = page cache dropped first, warm = the epoch after")
    print(f"{'configuration':<26} {'cold samples/s':>15} {'cold GB/s':>10} {'warm samples/s':>15} {'warm GB/s':>10}")
    for name, r in results.items():
        print(f"{name:<26} {r['cold']['samples_per_s']:>15,.0f} {r['cold']['gb_per_s']:>10.2f} "
              f"{r['warm']['samples_per_s']:>15,.0f} {r['warm']['gb_per_s']:>10.2f}")

    now = datetime.now().astimezone()
    out = args.json or REPO_ROOT / "benchmarks" / "results" / f"loader_io-{now.date().isoformat()}.json"
    report = {
        "dataset": {"path": str(path), "images": len(reader), "bytes": path.stat().st_size,
                    "stored_image_bytes": int(sizes.sum())},
        "batch_size": BATCH, "results": results,
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
        "versions": {"python": platform.python_version(), "slipstream": ss.__version__},
        "command": shlex.join([sys.executable, *sys.argv]), "timestamp": now.isoformat(timespec="seconds"),
    }
    write_json(out, report)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
