"""What checking page checksums costs a training run, in images/s.

Usage::

    python benchmarks/integrity.py [FOLDER] [--repeat N] [--rounds R] [--json PATH]

The dataset is FOLDER's JPEGs (default ``../shared/data/imagenet-sample``)
repeated ``--repeat`` times (default 8), written twice: with page checksums
(the default) and without.  A loader checks each page of a file with
checksums the first time its process reads it, so the cost falls on the
first epoch of every process and on no later one.  Each round runs, in a
fresh process per file, a loader with the ImageNet train pipeline
(RandomResizedCrop 224, flip, Normalize to float16, labels; batch 128,
random order, all cores, the page cache warm) for two epochs, timing each
whole epoch (the pipeline is compiled beforehand, over another loader).  The
two files alternate which goes first from round to round; the table gives
medians and ranges over the rounds, and the ratio of the two files' rates
within each round.  2-core timings drift by 10-40% between runs, more than
the checks cost: the script also times the checks alone (every page of the
file, on one core) and gives their share of the first epoch's CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = REPO_ROOT.parent / "shared" / "data" / "imagenet-sample"
DATA = REPO_ROOT / "benchmarks" / ".data"
BATCH = 128
VARIANTS = ("checksums", "no checksums")


def child(path: str, warm: str) -> None:
    """One fresh process: compile over ``warm``, then time two epochs over ``path``."""
    import slipstream as ss
    from slipstream.ops import presets

    pipelines = {**presets.imagenet_train(224), "label": []}
    with ss.Loader(warm, BATCH, pipelines, order=ss.Order("random", seed=1), verbose=False) as compiling:
        next(iter(compiling))
    rates = []
    with ss.Loader(path, BATCH, pipelines, order=ss.Order("random", seed=0), verbose=False) as loader:
        for _ in range(2):
            start, count = time.perf_counter(), 0
            for _, labels in loader:
                count += len(labels)
            rates.append(count / (time.perf_counter() - start))
        checked = loader.reader.pages_checked
    print(json.dumps({"epochs": rates, "pages_checked": checked}))


def run_child(path: Path, warm: Path) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", str(path), str(warm)], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):>9,.0f} [{min(values):,.0f}-{max(values):,.0f}]"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER, help="folder of JPEGs")
    parser.add_argument("--repeat", type=int, default=8, help="times the folder is repeated (default: 8)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, each one process per file (default: 5)")
    parser.add_argument("--json", type=Path, default=None, help="output JSON (default: benchmarks/results/)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0

    import slipstream as ss
    from slipstream.sources import find_jpegs

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import Repeated, write_json

    paths = find_jpegs(args.folder)
    if not paths:
        print(f"no JPEGs under {args.folder}")
        return 1
    fields = {"image": ss.RGBImageField(), "label": ss.IntField()}
    files = {}
    DATA.mkdir(parents=True, exist_ok=True)
    for variant in VARIANTS:  # written once, kept under benchmarks/.data
        files[variant] = DATA / f"integrity-{args.folder.name}-x{args.repeat}-{variant.replace(' ', '-')}.slip"
        if not files[variant].exists():
            ss.write(files[variant], Repeated(paths, args.repeat), fields, page_checksums=variant == "checksums")
    reader = ss.Reader(files["checksums"])
    print(f"{len(reader):,} JPEGs from {args.folder}, {reader.page_count} pages of {reader.page_size:,} bytes, "
          f"batch {BATCH}, {os.cpu_count()} cores, {args.rounds} rounds")
    check_seconds = []  # the work itself, on one core, with the pages in the page cache
    for _ in range(5):
        start = time.perf_counter()
        ss.Reader(files["checksums"], verify_pages=True).close()
        check_seconds.append(time.perf_counter() - start)
    check_s = statistics.median(check_seconds)
    print(f"checking every page: {check_s * 1000:.0f} ms on one core "
          f"({reader.data_size / check_s / 1e9:.1f} GB/s), median of 5")
    results: dict[str, list[dict]] = {variant: [] for variant in VARIANTS}
    for round_ in range(args.rounds):
        order = VARIANTS if round_ % 2 == 0 else VARIANTS[::-1]
        for variant in order:
            other = files[VARIANTS[1] if variant == VARIANTS[0] else VARIANTS[0]]
            results[variant].append(run_child(files[variant], other))
        line = ", ".join(f"{v}: " + " / ".join(f"{r:,.0f}" for r in results[v][-1]["epochs"]) for v in VARIANTS)
        print(f"  round {round_ + 1}: {line} images/s (epoch 1 / epoch 2)", flush=True)

    print(f"{'file':<14} {'epoch 1 images/s':>28} {'epoch 2 images/s':>28}  pages checked")
    for variant in VARIANTS:
        epochs = [[r["epochs"][e] for r in results[variant]] for e in range(2)]
        checked = sorted({r["pages_checked"] for r in results[variant]})
        print(f"{variant:<14} {summary(epochs[0]):>28} {summary(epochs[1]):>28}  {checked}")
    epoch_1 = statistics.median(r["epochs"][0] for r in results["checksums"])
    share = check_s / (len(reader) / epoch_1 * (os.cpu_count() or 1))
    print(f"the checks' share of the first epoch's CPU time: {share:.2%} ({check_s * 1000:.0f} ms of one core in "
          f"{len(reader) / epoch_1:.2f} s on {os.cpu_count()} cores)")
    ratios = {}
    for e in range(2):
        paired = [a["epochs"][e] / b["epochs"][e] for a, b in zip(*(results[v] for v in VARIANTS))]
        ratios[f"epoch_{e + 1}"] = {"median": statistics.median(paired), "min": min(paired), "max": max(paired),
                                    "rounds": paired}
        print(f"epoch {e + 1}, checksums / no checksums: median {statistics.median(paired):.3f} "
              f"[{min(paired):.3f}-{max(paired):.3f}]")

    now = datetime.now().astimezone()
    out = args.json or REPO_ROOT / "benchmarks" / "results" / f"integrity-{now.date().isoformat()}.json"
    write_json(out, {
        "dataset": {"images": len(reader), "pages": reader.page_count, "page_size": reader.page_size,
                    "folder": str(args.folder), "bytes": Path(files["checksums"]).stat().st_size},
        "batch_size": BATCH, "rounds": args.rounds, "results": results, "ratios": ratios,
        "check_all_pages_seconds": check_seconds, "check_share_of_first_epoch_cpu": share,
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
        "versions": {"python": platform.python_version(), "slipstream": ss.__version__},
        "command": shlex.join([sys.executable, *sys.argv]), "timestamp": now.isoformat(timespec="seconds"),
    })
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
