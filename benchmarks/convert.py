"""Converting WebDataset tar shards in object storage: ``slipstream.write``
on one machine against the Ray writer, in images/s.

Usage::

    python benchmarks/convert.py [FOLDER] [--repeat N] [--rounds R] [--json PATH]

FOLDER's JPEGs (default ``../shared/data/imagenet-sample``) repeated
``--repeat`` times (default 7: 5,600 images) are written as WebDataset tar
shards of 200 samples (``.jpg`` and ``.cls``) by the ``webdataset`` package
into a real S3-compatible server on 127.0.0.1 (SeaweedFS, from
``tests/object_store.py``).  Each round converts them into a sharded
dataset in the same server with:

- ``ss.write(url, ss.WebDataset(...), workers=1)`` and ``workers=2``;
- ``slipstream.ray.write(read_webdataset(...), url, concurrency=1)`` and
  ``concurrency=2`` on a local Ray instance with 2 CPUs, started once
  before the rounds (a team's cluster is already running).

Every conversion runs from the call to its return (the manifest written),
with ``RGBImageField()`` (JPEGs kept, each checked by a 1/8-scale decode)
and ``IntField()``.  The configurations alternate their order from round to
round; the table gives medians and ranges of images/s, and the ratio of the
Ray writer to ``ss.write`` at equal worker count within each round.  The
server shares this machine's 2 cores with the writers, and 2-core timings
drift by 10-40% between runs.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = REPO_ROOT.parent / "shared" / "data" / "imagenet-sample"
DATA = REPO_ROOT / "benchmarks" / ".data"
PER_SHARD = 200


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER, help="folder of JPEGs")
    parser.add_argument("--repeat", type=int, default=7, help="times the folder is repeated (default: 7)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default: 3)")
    parser.add_argument("--json", type=Path, default=None, help="output JSON (default: benchmarks/results/)")
    args = parser.parse_args(argv)

    import ray
    import webdataset

    import slipstream as ss
    import slipstream.ray as ssray
    from slipstream.format.objectstore import ObjectPrefix
    from slipstream.sources import find_jpegs

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from common import summary, write_json
    from object_store import S3Server

    paths = find_jpegs(args.folder)
    if not paths:
        print(f"no JPEGs under {args.folder}")
        return 1
    count = len(paths) * args.repeat
    fields = {"image": ss.RGBImageField(), "label": ss.IntField()}
    DATA.mkdir(parents=True, exist_ok=True)
    with S3Server(DATA / "s3-convert") as server:
        server.create_bucket("bench", exist_ok=True)
        remote = ss.Remote(storage_options=server.storage_options(), cache_dir=DATA / "convert-cache")
        source_url = "s3://bench/wds/"
        prefix = ObjectPrefix(source_url.rstrip("/"), remote)
        tars = DATA / "convert-tars"
        tars.mkdir(exist_ok=True)
        with webdataset.ShardWriter(str(tars / "train-%06d.tar"), maxcount=PER_SHARD, verbose=0) as sink:
            for k in range(count):
                sink.write({"__key__": f"{k:08d}", "jpg": paths[k % len(paths)].read_bytes(), "cls": k % 1000})
        for tar in sorted(tars.glob("*.tar")):
            prefix.put_file(tar.name, tar)
            tar.unlink()
        size = sum(prefix.size(n) for n in prefix.names())
        print(f"{count:,} JPEGs from {args.folder} as {len(prefix.names())} tar shards ({size / 1e9:.2f} GB) in "
              f"{source_url}; {os.cpu_count()} cores, {args.rounds} rounds")

        os.chdir(DATA)  # Ray's workers put the driver's folder on their path: not the source tree
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
        ray.data.DataContext.get_current().enable_progress_bars = False

        def with_write(workers: int) -> float:
            start = time.perf_counter()
            ss.write(f"s3://bench/out-write-{workers}", ss.WebDataset(source_url, fields, remote=remote),
                     workers=workers, remote=remote, verbose=False)
            return time.perf_counter() - start

        def with_ray(workers: int) -> float:
            start = time.perf_counter()
            dataset = ssray.read_webdataset(source_url, fields, remote=remote)
            ssray.write(dataset, f"s3://bench/out-ray-{workers}", fields, concurrency=workers, remote=remote,
                        overwrite=True)
            return time.perf_counter() - start

        configs = {"ss.write, 1 process": lambda: with_write(1), "ss.write, 2 processes": lambda: with_write(2),
                   "Ray writer, 1 worker": lambda: with_ray(1), "Ray writer, 2 workers": lambda: with_ray(2)}
        rates: dict[str, list[float]] = {name: [] for name in configs}
        for round_ in range(args.rounds):
            names = list(configs) if round_ % 2 == 0 else list(reversed(configs))
            for name in names:
                rates[name].append(count / configs[name]())
            print(f"round {round_ + 1}: " + ", ".join(f"{n} {rates[n][-1]:,.0f} img/s" for n in configs))
        ray.shutdown()

    ratios = {workers: [r / w for r, w in zip(rates[f"Ray writer, {workers} worker{'s' * (workers > 1)}"],
                                              rates[f"ss.write, {workers} process{'es' * (workers > 1)}"])]
              for workers in (1, 2)}
    print()
    print("| system | images/s | per worker | Ray / ss.write, same workers |")
    print("|---|---:|---:|---:|")
    for name in configs:
        workers = 2 if name.endswith(("2 processes", "2 workers")) else 1
        ratio = summary(ratios[workers], 2) if name.startswith("Ray") else ""
        print(f"| {name} | {summary(rates[name])} | {statistics.median(rates[name]) / workers:,.0f} | {ratio} |")
    met = {w: statistics.median(r) >= 0.85 for w, r in ratios.items()}
    print(f"\ntarget: the Ray writer within 15% of ss.write at equal worker count: "
          f"{'met' if all(met.values()) else 'missed'} (1 worker {statistics.median(ratios[1]):.2f}x, "
          f"2 workers {statistics.median(ratios[2]):.2f}x)")
    now = datetime.datetime.now()
    out = args.json or REPO_ROOT / "benchmarks" / "results" / f"convert-{now.date().isoformat()}.json"
    write_json(out, {"date": now.isoformat(timespec="seconds"), "images": count, "tar_bytes": size,
                     "rounds": args.rounds, "images_per_s": rates, "ray_over_write": ratios, "target_met": met})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
