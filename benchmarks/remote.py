"""Loading from object storage against loading from a local file, in images/s
and raw GB/s.

Usage::

    python benchmarks/remote.py [FOLDER] [--repeat N] [--rounds R] [--latency-ms MS] [--json PATH]
                                [--baseline PYTHON] [--no-pin] [--pipelines NAME ...]

The dataset is FOLDER's JPEGs (default ``../shared/data/imagenet-sample``)
repeated ``--repeat`` times (default 24: about 2.1 GB), written once as a
local file, converted into local shards, and copied, as shards, into a real
S3-compatible server started on 127.0.0.1 (SeaweedFS, from
``tests/object_store.py``).  Each round runs, in a fresh process each, the
same loader (batch 128, ``quasi_random`` order, seed 0) over:

- the local file (its pages in the OS page cache);
- the local shards (the same pages, in several files);
- the S3 copy, straight to the server (0 ms added) and through a relay that
  holds every request ``--latency-ms`` (default 50) before passing it on,
  each with an empty page cache: epoch 1 streams from the server, epoch 2
  reads the warm cache.

Three pipelines (``--pipelines`` picks some): ImageNet train
(RandomResizedCrop 224, flip, Normalize to float16, labels), ImageNet val
(resize, CenterCrop 224, Normalize), and the stored bytes alone (what the
loader moves, in GB/s).  Every process
compiles its pipeline over the local file before timing (one batch), and
times whole epochs of what a training step receives.  The configurations
alternate their order from round to round; the table gives medians and
ranges over the rounds and the ratios to the local file within each round.

The loader and the store run on cores of their own, as they would on two
machines: every loader process (the local baselines too) is pinned to all
cores but the last, with as many threads, and the S3 server and the
latency relay to the last (``os.sched_setaffinity``; on 2 cores, one core
each).  ``--no-pin`` lets them share every core, so that the server's work is
taken from the decoders'.  2-core timings drift by 10-40% between runs, so
the script also gives the CPU time of each part: the loader's process per
image, per epoch, and the server's and the relay's during each run.

``--baseline PYTHON`` runs every child a second time under another
interpreter (one whose ``import slipstream`` is another build, such as an
earlier commit), right after this build's run or right before it,
alternating; a last table gives each epoch's speed of this build over the
baseline's, paired by round: what a change costs the loading paths.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from common import Repeated, cpu_seconds, summary, write_json  # benchmarks/, next to this file

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = REPO_ROOT.parent / "shared" / "data" / "imagenet-sample"
DATA = REPO_ROOT / "benchmarks" / ".data"
BATCH = 128
PIPELINES = ("train", "val", "bytes")


def child(pipeline: str, path: str, warm: str, options: str, cache: str) -> None:
    """One fresh process: compile over ``warm`` (the local file of the same
    samples: the compiled stages are then reused as they are), then time
    two epochs over ``path``."""
    import slipstream as ss
    from slipstream.ops import StoredBytes, presets

    remote = ss.Remote(storage_options=json.loads(options), cache_dir=cache) if options else None

    def pipelines(reader):
        if pipeline == "bytes":
            return {"image": [StoredBytes(int(reader.metadata["image"]["size"].max()))], "label": []}
        preset = presets.imagenet_train if pipeline == "train" else presets.imagenet_val
        return {**preset(224), "label": []}

    with ss.Loader(warm, BATCH, pipelines(ss.Reader(warm)), order=ss.Order("quasi_random", seed=1),
                   verbose=False) as compiling:
        next(iter(compiling))
    reader = ss.open_dataset(path, remote=remote)
    sizes = reader.metadata["image"]["size"].astype("int64")
    epochs = []
    with ss.Loader(reader, BATCH, pipelines(reader), order=ss.Order("quasi_random", seed=0), verbose=False) as loader:
        for _ in range(2):
            start, cpu, count, size = time.perf_counter(), time.process_time(), 0, 0
            for _, labels in loader:
                count += len(labels)
                size += int(sizes[labels.numpy()].sum())  # labels are the sample indices
            took = time.perf_counter() - start
            epochs.append({"images_per_s": count / took, "gb_per_s": size / took / 1e9, "images": count,
                           "cpu_ms_per_image": (time.process_time() - cpu) * 1000 / count})
    downloads = reader.cache.downloads if getattr(reader, "cache", None) is not None else 0
    print(json.dumps({"epochs": epochs, "page_downloads": downloads}))


def run_child(pipeline: str, path: str, warm: Path, options: dict | None, server_pid: int,
              python: str = sys.executable, cores: set[int] | None = None) -> dict:
    """A child's result, with the CPU seconds the server and the relay (this
    process's thread) spent while it ran: the machine's other work.  The
    child runs on ``cores`` (default: any), with one thread per core."""
    cache = tempfile.mkdtemp(prefix="slipstream-bench-cache-", dir=DATA)
    server_cpu, relay_cpu = cpu_seconds(server_pid), time.process_time()
    env = {**os.environ, "NUMBA_NUM_THREADS": str(len(cores))} if cores else None
    try:
        done = subprocess.run([python, __file__, "--child", pipeline, path, str(warm),
                               json.dumps(options) if options else "", cache],
                              capture_output=True, text=True, cwd=DATA, env=env,
                              preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None)
        if done.returncode:
            raise RuntimeError(f"the {pipeline} run over {path} failed:\n{done.stderr[-3000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    result["server_cpu_s"] = cpu_seconds(server_pid) - server_cpu
    result["relay_cpu_s"] = time.process_time() - relay_cpu
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER, help="folder of JPEGs")
    parser.add_argument("--repeat", type=int, default=24, help="times the folder is repeated (default: 24)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default: 3)")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="latency the relay adds (default: 50)")
    parser.add_argument("--json", type=Path, default=None, help="output JSON (default: benchmarks/results/)")
    parser.add_argument("--baseline", default=None, metavar="PYTHON",
                        help="an interpreter whose slipstream is the build to compare this one with")
    parser.add_argument("--no-pin", action="store_true",
                        help="let the loader, the server and the relay share every core")
    parser.add_argument("--pipelines", nargs="+", choices=PIPELINES, default=list(PIPELINES),
                        help="the pipelines to time (default: all)")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0

    import slipstream as ss
    from slipstream.sources import find_jpegs

    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from object_store import Proxy, S3Server

    paths = find_jpegs(args.folder)
    if not paths:
        print(f"no JPEGs under {args.folder}")
        return 1
    fields = {"image": ss.RGBImageField(), "label": ss.IntField()}
    DATA.mkdir(parents=True, exist_ok=True)
    local = DATA / f"remote-{args.folder.name}-x{args.repeat}.slip"
    if not local.exists():
        ss.write(local, Repeated(paths, args.repeat), fields)
    shards = DATA / f"remote-{args.folder.name}-x{args.repeat}-shards"
    if not (shards / "manifest.json").exists():
        ss.convert(local, shards, shard_size="512MB", overwrite=True)
    cores = sorted(os.sched_getaffinity(0))
    pinned = not args.no_pin and len(cores) >= 2
    loader_cores = set(cores[:-1]) if pinned else None
    if pinned:
        os.sched_setaffinity(0, cores[-1:])  # the relay's thread, and the server's processes started below
    placement = (f"loader on cores {_cores(loader_cores)}, S3 server and relay on core {cores[-1]}" if pinned
                 else f"loader, S3 server and relay sharing {len(cores)} cores")
    latency = args.latency_ms / 1000
    with S3Server(DATA / "s3-server") as server, Proxy(server.endpoint, delay_s=latency) as proxy:
        server.create_bucket("bench", exist_ok=True)
        url = "s3://bench/train"
        start = time.perf_counter()
        ss.convert(local, url, shard_size="512MB", remote=ss.Remote(storage_options=server.storage_options()),
                   overwrite=True)  # the server keeps its data between runs: the copy is timed anew
        upload_s = time.perf_counter() - start
        reader = ss.Reader(local)
        print(f"{len(reader):,} JPEGs from {args.folder} ({local.stat().st_size / 1e9:.2f} GB, {reader.page_count} "
              f"pages of {reader.page_size >> 20} MiB); copied to {url} in {upload_s:.0f} s; batch {BATCH}, "
              f"quasi_random, {placement}, {args.rounds} rounds")
        configs = {"local file": (str(local), None),
                   "local shards": (str(shards), None),
                   "s3, 0 ms": (url, server.storage_options()),
                   f"s3, {args.latency_ms:.0f} ms": (url, server.storage_options(endpoint=proxy.endpoint))}
        pipelines = [p for p in PIPELINES if p in args.pipelines]
        results: dict[str, dict[str, list[dict]]] = {p: {c: [] for c in configs} for p in pipelines}
        baseline: dict[str, dict[str, list[dict]]] = {p: {c: [] for c in configs} for p in pipelines}
        for round_ in range(args.rounds):
            names = list(configs) if round_ % 2 == 0 else list(configs)[::-1]
            for pipeline in pipelines:
                for k, name in enumerate(names):
                    path, options = configs[name]
                    builds = [(results, sys.executable)] + ([(baseline, args.baseline)] if args.baseline else [])
                    for table, python in builds if (round_ + k) % 2 == 0 else builds[::-1]:
                        table[pipeline][name].append(run_child(pipeline, path, local, options, server.pid, python,
                                                               loader_cores))
                line = ", ".join(f"{n}: " + " / ".join(f"{e['images_per_s']:,.0f}"
                                                       for e in results[pipeline][n][-1]["epochs"]) for n in configs)
                print(f"  round {round_ + 1}, {pipeline}: {line} images/s (epoch 1 / epoch 2)", flush=True)

    print(f"\n{placement}.\nCPU per run (both epochs): the loader's ms per image (epoch 1 / epoch 2), over the "
          f"local file's in the same round (epoch 1 / epoch 2), and the seconds the server and the relay took meanwhile")
    cpu_ratios: dict[str, dict[str, list[dict]]] = {}
    for pipeline in pipelines:
        base = results[pipeline]["local file"]
        for name in configs:
            runs = results[pipeline][name]
            per_image = [summary([r["epochs"][e]["cpu_ms_per_image"] for r in runs], 2) for e in range(2)]
            over = cpu_ratios.setdefault(pipeline, {})[name] = [
                _ratio([r["epochs"][e]["cpu_ms_per_image"] / b["epochs"][e]["cpu_ms_per_image"]
                        for r, b in zip(runs, base)]) for e in range(2)]
            vs = " / ".join(f"{o['median']:.2f}x [{o['min']:.2f}-{o['max']:.2f}]" for o in over)
            print(f"{pipeline:<8} {name:<12} loader {per_image[0]} / {per_image[1]} ms per image ({vs}); server "
                  f"{summary([r['server_cpu_s'] for r in runs], 1)} s, relay {summary([r['relay_cpu_s'] for r in runs], 1)} s")
    ratios: dict[str, dict[str, dict]] = {}
    print(f"\n{'pipeline':<8} {'source':<12} {'epoch 1 (cold) images/s':>30} {'GB/s':>18} "
          f"{'epoch 2 (warm) images/s':>30} {'GB/s':>18}  vs local (epoch 1 / 2)")
    for pipeline in pipelines:
        base = results[pipeline]["local file"]
        for name in configs:
            runs = results[pipeline][name]
            cells = []
            for e in range(2):
                cells += [summary([r["epochs"][e]["images_per_s"] for r in runs]),
                          summary([r["epochs"][e]["gb_per_s"] for r in runs], 2)]
            paired = ratios.setdefault(pipeline, {})[name] = _paired(runs, base)
            vs = " / ".join(f"{p['median']:.3f} [{p['min']:.2f}-{p['max']:.2f}]" for p in paired.values())
            print(f"{pipeline:<8} {name:<12} {cells[0]:>30} {cells[1]:>18} {cells[2]:>30} {cells[3]:>18}  {vs}")
    against = _against_baseline(results, baseline) if args.baseline else None
    now = datetime.now().astimezone()
    out = args.json or REPO_ROOT / "benchmarks" / "results" / f"remote-{now.date().isoformat()}.json"
    write_json(out, {
        "dataset": {"images": len(reader), "bytes": local.stat().st_size, "pages": reader.page_count,
                    "page_size": reader.page_size, "folder": str(args.folder)},
        "batch_size": BATCH, "order": "quasi_random", "rounds": args.rounds, "latency_ms": args.latency_ms,
        "placement": placement, "loader_cores": sorted(loader_cores) if loader_cores else None,
        "upload_seconds": upload_s, "results": results, "ratios": ratios, "cpu_ratios": cpu_ratios,
        "baseline": {"python": args.baseline, "results": baseline, "ratios": against} if args.baseline else None,
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
        "versions": {"python": platform.python_version(), "slipstream": ss.__version__},
        "command": shlex.join([sys.executable, *sys.argv]), "timestamp": now.isoformat(timespec="seconds"),
    })
    print(f"wrote {out}")
    return 0


def _cores(cores: set[int]) -> str:
    """``{0, 1, 2}`` as ``0-2``, ``{0}`` as ``0``."""
    low, high = min(cores), max(cores)
    return str(low) if low == high else f"{low}-{high}"


def _ratio(rounds: list[float]) -> dict:
    """Median, range and each round's of paired ratios."""
    return {"median": statistics.median(rounds), "min": min(rounds), "max": max(rounds), "rounds": rounds}


def _paired(runs: list[dict], base: list[dict]) -> dict:
    """Per epoch, the images/s of ``runs`` over those of ``base``, paired by
    round: median, range and each round's."""
    return {f"epoch_{e + 1}": _ratio([r["epochs"][e]["images_per_s"] / b["epochs"][e]["images_per_s"]
                                      for r, b in zip(runs, base)]) for e in range(2)}


def _against_baseline(results: dict, baseline: dict) -> dict:
    """Print and return each epoch's images/s of this build over the
    baseline's, paired by round (the two ran next to each other)."""
    print("\nthis build / baseline, images/s paired by round (epoch 1, epoch 2):")
    against: dict[str, dict[str, dict]] = {}
    for pipeline, sources in results.items():
        for name, runs in sources.items():
            paired = against.setdefault(pipeline, {})[name] = _paired(runs, baseline[pipeline][name])
            cells = ", ".join(f"{p['median']:.3f} [{p['min']:.3f}-{p['max']:.3f}]" for p in paired.values())
            print(f"{pipeline:<8} {name:<12} {cells}")
    return against


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
