"""What the writer's work on each JPEG costs, and ``ss.write`` per core,
against another build.

Usage::

    python benchmarks/check.py [FOLDER] [--tiles] [--repeat N] [--rounds R]
                               [--baseline PYTHON | --baseline-library LIBSLIPSTREAM.so] [--json PATH]

Without ``--tiles``, the images are written as ``RGBImageField(tile_width=None)``,
which keeps each JPEG's bytes and first checks that it decodes.
The check used to be a decode of the whole image at 1/8 scale; it is now
``native.jpeg_check``, which gives exactly that decode's verdict and, for
ordinary sequential JPEGs, reads their Huffman codes without making pixels
(``native.jpeg_scan``).  With ``--tiles``, they are written as
``RGBImageField()``, the default, which re-codes each JPEG into 32-pixel
tiles (``native.jpeg_add_restart_markers``).

Two tables, from FOLDER's JPEGs (default ``../shared/data/imagenet-sample``):

1. **The work alone**, in this process: milliseconds per image of the
   1/8-scale decode and of ``jpeg_check`` (the share of images the scanner
   answers alone beside them), or with ``--tiles`` of this build's re-coding
   and, with ``--baseline-library``, the baseline library's (and the bytes
   each writes), over every image, in alternating order each round.
2. **``ss.write`` per core**: the folder repeated ``--repeat`` times
   (default 4), written by ``ss.write(path, samples, fields, workers=0)``
   (one process, one core) and ``workers=2``, each write in a fresh child
   process of this build and of the baseline (``--baseline``: another
   interpreter, a build before the change; ``--baseline-library``: this
   interpreter with another build's native library, for a change to the C
   code alone), alternating from round to round: images/s, CPU
   milliseconds per image (the child and its workers), and this build over
   the baseline per round.  "Where the time goes" splits each build's CPU
   per image into the work of table 1 and the rest (reading files, the
   writer's pages, checksums, Python).

Medians and ranges over ``--rounds`` (default 5).  2-core timings drift by
10-40% from run to run: compare ratios within a run.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from common import Repeated, record, summary  # benchmarks/, next to this file

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = REPO_ROOT.parent / "shared" / "data" / "imagenet-sample"
WORKERS = (0, 2)


def child(folder: Path, repeat: int, workers: int, tiles: bool) -> None:
    """One timed ``ss.write`` in this process; prints its JSON line."""
    import slipstream as ss
    from slipstream.sources import find_jpegs

    samples = Repeated(find_jpegs(folder), repeat)
    fields = {"image": ss.RGBImageField() if tiles else ss.RGBImageField(tile_width=None), "label": ss.IntField()}
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


def run_child(build: Build, folder: Path, repeat: int, workers: int, tiles: bool) -> dict[str, float]:
    python, library = build
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SLIPSTREAM_LIBRARY")} \
        if python != sys.executable else dict(os.environ)
    if library:
        env["SLIPSTREAM_LIBRARY"] = library
    out = subprocess.run([python, str(Path(__file__).resolve()), str(folder), "--child", str(workers),
                          "--repeat", str(repeat), *(["--tiles"] if tiles else [])],
                         capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    if out.returncode:
        raise RuntimeError(f"{python} failed:\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return {"images_per_s": result["images"] / result["seconds"], "cpu_ms": 1e3 * result["cpu"] / result["images"]}


# An interpreter, and the native library its children load (None: its own).
Build = tuple[str, str | None]


def check_costs(datas: list[bytes], rounds: int) -> dict[str, list[float]]:
    """Milliseconds per image of each check, per round, alternating their order."""
    from slipstream import native

    return work_costs(datas, rounds, {"decode at 1/8": lambda d: native.jpeg_decode(d, scale_denom=8),
                                      "jpeg_check": native.jpeg_check})


def recoding_costs(datas: list[bytes], rounds: int, baseline_library: str | None) -> tuple[dict[str, list[float]],
                                                                                           dict[str, int]]:
    """Milliseconds per image of this build's re-coding into 32-pixel tiles
    and the baseline library's, per round, alternating; and the bytes each
    writes for the whole folder."""
    from slipstream import native

    recoders: dict[str, Callable[[bytes], bytes]] = {"this build": lambda d: native.jpeg_add_restart_markers(d, 32)}
    if baseline_library:
        recoders["baseline"] = library_recoder(baseline_library)
    sizes = {name: sum(len(recode(d)) for d in datas) for name, recode in recoders.items()}
    return work_costs(datas, rounds, recoders), sizes


def library_recoder(path: str) -> Callable[[bytes], bytes]:
    """``slip_jpeg_add_restart_markers`` of the native library at ``path``, at
    32 pixels, called as the package calls its own."""
    lib = ctypes.CDLL(path, mode=os.RTLD_LOCAL)
    lib.slip_jpeg_add_restart_markers.restype = ctypes.c_int32
    lib.slip_jpeg_add_restart_markers.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int32, ctypes.c_void_p,
                                                  ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]

    def recode(data: bytes) -> bytes:
        out = ctypes.create_string_buffer(len(data) + len(data) // 4 + 65536)
        size = ctypes.c_size_t(0)
        status = lib.slip_jpeg_add_restart_markers(data, len(data), 32, out, len(out), ctypes.byref(size))
        if status:
            raise RuntimeError(f"{path}: slip_jpeg_add_restart_markers returned {status}")
        return out.raw[:size.value]

    return recode


def work_costs(datas: list[bytes], rounds: int, work: dict[str, Callable[[bytes], object]]) -> dict[str, list[float]]:
    """CPU milliseconds per image of each kind of work over ``datas``, per
    round, alternating their order."""
    costs: dict[str, list[float]] = {name: [] for name in work}
    for r in range(rounds):
        for name in (list(work) if r % 2 == 0 else list(work)[::-1]):
            start = time.process_time()
            for d in datas:
                work[name](d)
            costs[name].append(1e3 * (time.process_time() - start) / len(datas))
    return costs


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER, help="folder of JPEGs")
    parser.add_argument("--tiles", action="store_true", help="write the default layout, 32-pixel tiles")
    parser.add_argument("--repeat", type=int, default=4, help="copies of the folder each write stores (default 4)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    baseline = parser.add_mutually_exclusive_group()
    baseline.add_argument("--baseline", default=None, metavar="PYTHON", help="interpreter of the build to compare with")
    baseline.add_argument("--baseline-library", default=None, metavar="SO",
                          help="native library of the build to compare with, under this interpreter")
    parser.add_argument("--json", type=Path, default=None, help="output JSON (default: benchmarks/results/)")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.folder, args.repeat, args.child, args.tiles)
        return 0

    from slipstream import native
    from slipstream.sources import find_jpegs

    paths = find_jpegs(args.folder)
    if not paths:
        print(f"no JPEGs under {args.folder}")
        return 1
    datas = [p.read_bytes() for p in paths]
    original = sum(map(len, datas))
    scanned = sum(native.jpeg_scan(d) for d in datas)
    sizes: dict[str, int] = {}
    print(f"{len(datas)} JPEGs of {args.folder} ({original / len(datas) / 1e3:.0f} KB on average), "
          f"ms per image over {args.rounds} rounds")
    if args.tiles:
        costs, sizes = recoding_costs(datas, args.rounds, args.baseline_library)
        print("  the re-coding into 32-pixel tiles alone (bytes written, against the JPEGs')")
        for name, values in costs.items():
            print(f"  {name:<14} {summary(values, 3)}   {sizes[name] / original:.4f}x")
        if "baseline" in costs:
            speed = [b / a for a, b in zip(costs["this build"], costs["baseline"])]
            print(f"  baseline / this build: {summary(speed, 2)}")
    else:
        costs = check_costs(datas, args.rounds)
        print(f"  the check alone; jpeg_scan answers {scanned} of {len(datas)} alone")
        for name, values in costs.items():
            print(f"  {name:<14} {summary(values, 3)}")
        speed = [a / b for a, b in zip(costs["decode at 1/8"], costs["jpeg_check"])]
        print(f"  decode at 1/8 / jpeg_check: {summary(speed, 2)}")

    builds: dict[str, Build] = {"this build": (sys.executable, None)}
    if args.baseline or args.baseline_library:
        builds["baseline"] = (args.baseline or sys.executable, args.baseline_library)
    writes: dict[str, dict[int, list[dict[str, float]]]] = {b: {w: [] for w in WORKERS} for b in builds}
    for r in range(args.rounds):
        order = list(builds) if r % 2 == 0 else list(builds)[::-1]
        for workers in WORKERS:
            for build in order:
                writes[build][workers].append(run_child(builds[build], args.folder, args.repeat, workers, args.tiles))
    count = len(paths) * args.repeat
    field = "RGBImageField()" if args.tiles else "RGBImageField(tile_width=None)"
    print(f"\nss.write of {count} JPEGs ({args.repeat} x the folder), {field} and IntField(), "
          f"{args.rounds} rounds, {os.cpu_count()} cores")
    print(f"  {'build':<12} {'workers':>7} {'images/s':>22} {'CPU ms/image':>22}")
    for build in builds:
        for workers in WORKERS:
            runs = writes[build][workers]
            print(f"  {build:<12} {workers:>7} {summary([x['images_per_s'] for x in runs]):>22} "
                  f"{summary([x['cpu_ms'] for x in runs], 3):>22}")
    ratios: dict[str, dict[str, float | list[float]]] = {}
    if len(builds) > 1:
        print("\n  this build / baseline, paired by round:")
        for workers in WORKERS:
            mine, theirs = writes["this build"][workers], writes["baseline"][workers]
            rate = [a["images_per_s"] / b["images_per_s"] for a, b in zip(mine, theirs)]
            per_core = [b["cpu_ms"] / a["cpu_ms"] for a, b in zip(mine, theirs)]
            ratios[str(workers)] = {"images_per_s": rate, "images_per_cpu_second": per_core}
            print(f"  workers={workers}: images/s {summary(rate, 2)}, images per CPU second {summary(per_core, 2)}")
        # The baseline's work: its re-coding, measured above, or the decode the check stands for.
        work = {"this build": costs["this build" if args.tiles else "jpeg_check"],
                "baseline": costs.get("baseline" if args.tiles else "decode at 1/8")}
        print("\n  where the time goes, CPU ms per image (workers=0, medians): work + rest")
        for build in ("baseline", "this build"):
            if work[build]:
                total, part = statistics.median(x["cpu_ms"] for x in writes[build][0]), statistics.median(work[build])
                print(f"  {build:<12} {total:.3f} = {part:.3f} {'re-coding' if args.tiles else 'check'} "
                      f"+ {total - part:.3f} rest")
    path = record({"folder": str(args.folder), "images": len(paths), "repeat": args.repeat, "rounds": args.rounds,
                   "tiles": args.tiles, "scanner_answers": scanned, "work_ms_per_image": costs,
                   "bytes": {"original": original, **sizes},
                   "writes": {b: {str(w): runs for w, runs in per.items()} for b, per in writes.items()},
                   "baseline": args.baseline, "baseline_library": args.baseline_library, "ratios": ratios},
                  "check-tiles" if args.tiles else "check", args.json)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
