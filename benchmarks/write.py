"""How fast a folder of JPEGs becomes a dataset file, with 1 and 2 workers.

Usage::

    python benchmarks/write.py [FOLDER] [--passes N] [--json PATH] [--check]

FOLDER defaults to ``../shared/data/imagenet-sample`` (800 ImageNet JPEGs).
Three ways of storing the images are measured, each with 1 and 2 worker
processes, the fastest of ``--passes`` interleaved passes (machine noise only
ever slows a pass): ``pass-through`` (``RGBImageField(tile_width=None)``:
every JPEG checked to decode, then stored byte for byte), ``tiled``
(``RGBImageField()``, the default: every JPEG re-coded losslessly into
32-pixel tiles) and ``re-encode 256`` (``RGBImageField(max_resolution=256)``:
decoded at the best DCT scale, shrunk so the longer side is 256, compressed
at quality 90, tiled).  Each pass is
a whole ``slipstream.write`` call, worker start-up and fsync included.  The
table shows images/s, the 2-worker speed-up and the file size; the
expectation checked is a pass-through speed-up of at least 1.6.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import slipstream as ss
from slipstream.sources import find_jpegs
from common import write_json  # noqa: E402  (benchmarks/, next to this file)

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = REPO_ROOT.parent / "shared" / "data" / "imagenet-sample"
MODES = {"pass-through": ss.RGBImageField(tile_width=None), "tiled": ss.RGBImageField(),
         "re-encode 256": ss.RGBImageField(max_resolution=256)}
WORKERS = (1, 2)
MIN_PASS_THROUGH_SPEEDUP = 1.6


def measure(paths: list[Path], passes: int, folder: Path) -> dict[str, dict]:
    samples = [(str(p), k) for k, p in enumerate(paths)]
    results = {mode: {"images_per_s": {}, "bytes": 0} for mode in MODES}
    for _ in range(passes):
        for mode, field in MODES.items():
            for workers in WORKERS:
                target = folder / f"{mode.replace(' ', '-')}-{workers}.slip"
                start = time.perf_counter()
                ss.write(target, samples, {"image": field, "label": ss.IntField()}, workers=workers, verbose=False)
                rate = len(samples) / (time.perf_counter() - start)
                best = results[mode]["images_per_s"]
                best[workers] = max(best.get(workers, 0.0), rate)
                results[mode]["bytes"] = target.stat().st_size
                target.unlink()
    return results


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER, help="folder of JPEGs")
    parser.add_argument("--passes", type=int, default=3, help="passes per configuration (default: 3)")
    parser.add_argument("--json", type=Path, default=None, help="output JSON (default: benchmarks/results/)")
    parser.add_argument("--check", action="store_true", help="exit 1 when the expectation is missed")
    args = parser.parse_args(argv)
    paths = find_jpegs(args.folder)
    if not paths:
        print(f"no JPEGs under {args.folder}")
        return 1
    source_bytes = sum(p.stat().st_size for p in paths)
    with tempfile.TemporaryDirectory(prefix="slipstream-write-") as tmp:
        results = measure(paths, args.passes, Path(tmp))

    print(f"writing {len(paths)} JPEGs ({source_bytes / 1e6:.1f} MB) from {args.folder}, {os.cpu_count()} cores")
    print(f"{'mode':<16} {'1 worker':>10} {'2 workers':>10} {'speed-up':>9} {'file MB':>9}")
    for mode, r in results.items():
        rates = r["images_per_s"]
        r["speedup"] = rates[2] / rates[1]
        print(f"{mode:<16} {rates[1]:>10.0f} {rates[2]:>10.0f} {r['speedup']:>9.2f} {r['bytes'] / 1e6:>9.1f}")
    speedup = results["pass-through"]["speedup"]
    met = speedup >= MIN_PASS_THROUGH_SPEEDUP
    print(f"pass-through, 2 workers / 1 worker: {speedup:.2f} (expected >= {MIN_PASS_THROUGH_SPEEDUP})")
    if not met:
        print(f"EXPECTATION FAILED: the pass-through speed-up is {speedup:.2f}, below {MIN_PASS_THROUGH_SPEEDUP}")

    now = datetime.now().astimezone()
    path = args.json or REPO_ROOT / "benchmarks" / "results" / f"write-{now.date().isoformat()}.json"
    report = {
        "folder": str(args.folder), "images": len(paths), "source_bytes": source_bytes,
        "results": {mode: {**r, "images_per_s": {str(k): v for k, v in r["images_per_s"].items()}}
                    for mode, r in results.items()},
        "expectations_met": met, "passes": args.passes,
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
        "versions": {"python": platform.python_version(), "slipstream": ss.__version__,
                     "libslipstream": ss.native.version()},
        "command": shlex.join([sys.executable, *sys.argv]), "timestamp": now.isoformat(timespec="seconds"),
    }
    write_json(path, report)
    print(f"wrote {path}")
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
