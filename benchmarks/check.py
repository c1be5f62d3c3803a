"""What the writer's JPEG check costs, and ``ss.write`` per core, against
another build.

Usage::

    python benchmarks/check.py [FOLDER] [--repeat N] [--rounds R] [--baseline PYTHON] [--json PATH]

``RGBImageField(tile_width=None)`` keeps each JPEG's bytes and first checks
that it decodes.
The check used to be a decode of the whole image at 1/8 scale; it is now
``native.jpeg_check``, which gives exactly that decode's verdict and, for
ordinary sequential JPEGs, reads their Huffman codes without making pixels
(``native.jpeg_scan``).

Two tables, from FOLDER's JPEGs (default ``../shared/data/imagenet-sample``):

1. **The check alone**, in this process: milliseconds per image of the
   1/8-scale decode and of ``jpeg_check``, over every image, in alternating
   order each round, and the share of images the scanner answers alone.
2. **``ss.write`` per core**: the folder repeated ``--repeat`` times
   (default 4), written by ``ss.write(path, samples, fields, workers=0)``
   (one process, one core) and ``workers=2``, each write in a fresh child
   process of this build and, with ``--baseline``, of another interpreter
   (a build before the check), alternating from round to round: images/s,
   CPU milliseconds per image (the child and its workers), and this build
   over the baseline per round.  "Where the time goes" splits each build's
   CPU per image into its check (table 1) and the rest (reading files,
   the writer's pages, checksums, Python).

Medians and ranges over ``--rounds`` (default 5).  2-core timings drift by
10-40% from run to run: compare ratios within a run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import Repeated, record, summary  # benchmarks/, next to this file

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = REPO_ROOT.parent / "shared" / "data" / "imagenet-sample"
WORKERS = (0, 2)


def child(folder: Path, repeat: int, workers: int) -> None:
    """One timed ``ss.write`` in this process; prints its JSON line."""
    import slipstream as ss
    from slipstream.sources import find_jpegs

    samples = Repeated(find_jpegs(folder), repeat)
    fields = {"image": ss.RGBImageField(tile_width=None), "label": ss.IntField()}
    with tempfile.TemporaryDirectory(prefix="slipstream-check-") as tmp:
        before = _cpu()
        start = time.perf_counter()
        ss.write(Path(tmp) / "out.slip", samples, fields, workers=workers, verbose=False)
        seconds = time.perf_counter() - start
        cpu = _cpu() - before
    print(json.dumps({"images": len(samples), "seconds": seconds, "cpu": cpu}))


def _cpu() -> float:
    """CPU seconds of this process and its reaped children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_child(python: str, folder: Path, repeat: int, workers: int) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SLIPSTREAM_LIBRARY")} \
        if python != sys.executable else dict(os.environ)
    out = subprocess.run([python, str(Path(__file__).resolve()), str(folder), "--child", str(workers),
                          "--repeat", str(repeat)], capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    if out.returncode:
        raise RuntimeError(f"{python} failed:\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return {"images_per_s": result["images"] / result["seconds"], "cpu_ms": 1e3 * result["cpu"] / result["images"]}


def check_costs(datas: list[bytes], rounds: int) -> dict[str, list[float]]:
    """Milliseconds per image of each check, per round, alternating their order."""
    from slipstream import native

    checks = {"decode at 1/8": lambda d: native.jpeg_decode(d, scale_denom=8), "jpeg_check": native.jpeg_check}
    costs: dict[str, list[float]] = {name: [] for name in checks}
    for r in range(rounds):
        for name in (list(checks) if r % 2 == 0 else list(checks)[::-1]):
            start = time.process_time()
            for d in datas:
                checks[name](d)
            costs[name].append(1e3 * (time.process_time() - start) / len(datas))
    return costs


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER, help="folder of JPEGs")
    parser.add_argument("--repeat", type=int, default=4, help="copies of the folder each write stores (default 4)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--baseline", default=None, metavar="PYTHON", help="interpreter of the build to compare with")
    parser.add_argument("--json", type=Path, default=None, help="output JSON (default: benchmarks/results/)")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.folder, args.repeat, args.child)
        return 0

    from slipstream import native
    from slipstream.sources import find_jpegs

    paths = find_jpegs(args.folder)
    if not paths:
        print(f"no JPEGs under {args.folder}")
        return 1
    datas = [p.read_bytes() for p in paths]
    scanned = sum(native.jpeg_scan(d) for d in datas)
    costs = check_costs(datas, args.rounds)
    print(f"the check alone, {len(datas)} JPEGs of {args.folder} ({sum(map(len, datas)) / len(datas) / 1e3:.0f} KB "
          f"on average), ms per image over {args.rounds} rounds; jpeg_scan answers {scanned} of {len(datas)} alone")
    for name, values in costs.items():
        print(f"  {name:<14} {summary(values, 3)}")
    speed = [a / b for a, b in zip(costs["decode at 1/8"], costs["jpeg_check"])]
    print(f"  decode at 1/8 / jpeg_check: {summary(speed, 2)}")

    builds = {"this build": sys.executable, **({"baseline": args.baseline} if args.baseline else {})}
    writes: dict[str, dict[int, list[dict[str, float]]]] = {b: {w: [] for w in WORKERS} for b in builds}
    for r in range(args.rounds):
        order = list(builds) if r % 2 == 0 else list(builds)[::-1]
        for workers in WORKERS:
            for build in order:
                writes[build][workers].append(run_child(builds[build], args.folder, args.repeat, workers))
    count = len(paths) * args.repeat
    print(f"\nss.write of {count} JPEGs ({args.repeat} x the folder), RGBImageField() and IntField(), "
          f"{args.rounds} rounds, {os.cpu_count()} cores")
    print(f"  {'build':<12} {'workers':>7} {'images/s':>22} {'CPU ms/image':>22}")
    for build in builds:
        for workers in WORKERS:
            runs = writes[build][workers]
            print(f"  {build:<12} {workers:>7} {summary([x['images_per_s'] for x in runs]):>22} "
                  f"{summary([x['cpu_ms'] for x in runs], 3):>22}")
    ratios: dict[str, dict[str, float | list[float]]] = {}
    if args.baseline:
        print("\n  this build / baseline, paired by round:")
        for workers in WORKERS:
            mine, theirs = writes["this build"][workers], writes["baseline"][workers]
            rate = [a["images_per_s"] / b["images_per_s"] for a, b in zip(mine, theirs)]
            per_core = [b["cpu_ms"] / a["cpu_ms"] for a, b in zip(mine, theirs)]
            ratios[str(workers)] = {"images_per_s": rate, "images_per_cpu_second": per_core}
            print(f"  workers={workers}: images/s {summary(rate, 2)}, images per CPU second {summary(per_core, 2)}")
        check_now, check_before = statistics.median(costs["jpeg_check"]), statistics.median(costs["decode at 1/8"])
        print("\n  where the time goes, CPU ms per image (workers=0, medians): check + rest")
        for build, check in (("baseline", check_before), ("this build", check_now)):
            total = statistics.median(x["cpu_ms"] for x in writes[build][0])
            print(f"  {build:<12} {total:.3f} = {check:.3f} check + {total - check:.3f} rest")
    path = record({"folder": str(args.folder), "images": len(paths), "repeat": args.repeat, "rounds": args.rounds,
                   "scanner_answers": scanned, "check_ms_per_image": costs,
                   "writes": {b: {str(w): runs for w, runs in per.items()} for b, per in writes.items()},
                   "baseline": args.baseline, "ratios": ratios}, "check", args.json)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
