"""Converting WebDataset tar shards in object storage: ``slipstream.write``
on one machine against the Ray writer, in images/s.

Usage::

    python benchmarks/convert.py [FOLDER] [--repeat N] [--rounds R] [--json PATH]

FOLDER's JPEGs (default ``../shared/data/imagenet-sample``) repeated
``--repeat`` times (default 7: 5,600 images) are written as WebDataset tar
shards of 1,000 samples (``.jpg`` and ``.cls``) by the ``webdataset`` package
into a real S3-compatible server on 127.0.0.1 (SeaweedFS, from
``tests/object_store.py``).  Each round converts them into a sharded
dataset in the same server with:

- ``ss.write(url, ss.WebDataset(...), workers=1)`` and ``workers=2``;
- ``slipstream.ray.write(read_webdataset(..., concurrency=n), url,
  concurrency=n)`` for n = 1 and 2 (the Ray writer);
- ``read_webdataset(..., concurrency=2).write_datasink(SlipstreamDatasink(url),
  concurrency=2)`` (the datasink, which keeps its parts in the store),

on a local Ray instance with 2 CPUs started once before the rounds (a
team's cluster is already running).

Every conversion runs from the call to its return (the manifest written),
with ``RGBImageField(tile_width=None)`` (JPEGs kept, each checked by ``native.jpeg_check``)
and ``IntField()``, into shards of 64 MB.  An untimed Ray conversion of one
tar shard first starts Ray's worker processes.  The configurations
alternate their order from round to round; the table gives medians and
ranges of images/s, and the ratio of the Ray writer to ``ss.write`` at
equal worker count within each round.  The CPU of each conversion is
split into the S3 server's seconds and the rest of the machine's (the
writers, Ray, this process) per image: on a cluster the store is elsewhere,
and the rest is what the nodes spend.
The server shares this machine's 2 cores with the writers, and 2-core
timings drift by 10-40% between runs.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from common import cpu_seconds, machine_cpu_seconds, summary, write_json  # benchmarks/, next to this file

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = REPO_ROOT.parent / "shared" / "data" / "imagenet-sample"
DATA = REPO_ROOT / "benchmarks" / ".data"
PER_SHARD = 1000
"""Samples per tar shard; the Ray writer reads each shard in one task, and
Ray takes about 0.1-0.2 s to schedule a task on a busy 2-core machine, so
shards of a few hundred samples would measure scheduling more than
conversion (img2dataset writes 10,000 per shard)."""
SHARD_SIZE = "64MB"
"""Shards of the converted datasets: several, as for a dataset of any size
(one shard would leave a conversion's last step to one task)."""


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

    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from object_store import S3Server

    paths = find_jpegs(args.folder)
    if not paths:
        print(f"no JPEGs under {args.folder}")
        return 1
    count = len(paths) * args.repeat
    fields = {"image": ss.RGBImageField(tile_width=None), "label": ss.IntField()}
    DATA.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(DATA / "s3-convert", ignore_errors=True)  # the server keeps overwritten objects' space
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
                     workers=workers, remote=remote, verbose=False, shard_size=SHARD_SIZE, overwrite=True)
            return time.perf_counter() - start

        def with_ray(workers: int, source: str = source_url) -> float:
            start = time.perf_counter()
            dataset = ssray.read_webdataset(source, fields, remote=remote, concurrency=workers)
            ssray.write(dataset, f"s3://bench/out-ray-{workers}", fields, concurrency=workers, remote=remote,
                        overwrite=True, shard_size=SHARD_SIZE)
            return time.perf_counter() - start

        def with_datasink(workers: int) -> float:
            start = time.perf_counter()
            dataset = ssray.read_webdataset(source_url, fields, remote=remote, concurrency=workers)
            dataset.context.execution_options.preserve_order = True
            dataset.write_datasink(ssray.SlipstreamDatasink(f"s3://bench/out-sink-{workers}", fields, remote=remote,
                                                            overwrite=True, shard_size=SHARD_SIZE),
                                   concurrency=workers)
            return time.perf_counter() - start

        with_ray(2, source_url + prefix.names()[0])  # starts Ray's worker processes, as on a running cluster

        configs = {"ss.write, 1 process": lambda: with_write(1), "ss.write, 2 processes": lambda: with_write(2),
                   "Ray writer, 1 worker": lambda: with_ray(1), "Ray writer, 2 workers": lambda: with_ray(2),
                   "Ray datasink, 2 workers": lambda: with_datasink(2)}
        rates: dict[str, list[float]] = {name: [] for name in configs}
        server_cpu: dict[str, list[float]] = {name: [] for name in configs}
        other_cpu: dict[str, list[float]] = {name: [] for name in configs}  # writers, Ray, this process
        for round_ in range(args.rounds):
            names = list(configs) if round_ % 2 == 0 else list(reversed(configs))
            for name in names:
                server_before, machine_before = cpu_seconds(server.pid), machine_cpu_seconds()
                rates[name].append(count / configs[name]())
                server_cpu[name].append(cpu_seconds(server.pid) - server_before)
                other_cpu[name].append(machine_cpu_seconds() - machine_before - server_cpu[name][-1])
            print(f"round {round_ + 1}: " + ", ".join(f"{n} {rates[n][-1]:,.0f} img/s" for n in configs))
        ray.shutdown()

    def workers_of(name: str) -> int:
        return 2 if name.endswith(("2 processes", "2 workers")) else 1

    # each Ray configuration over ss.write with as many workers, round by round
    ratios = {name: [r / w for r, w in zip(rates[name], rates[f"ss.write, {workers_of(name)} process"
                                                              f"{'es' * (workers_of(name) > 1)}"])]
              for name in configs if name.startswith("Ray")}
    print()
    print("| system | images/s | per worker | over ss.write, same workers | S3 server CPU s | "
          "other CPU ms per image |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in configs:
        ratio = summary(ratios[name], 2) if name in ratios else ""
        print(f"| {name} | {summary(rates[name])} | {statistics.median(rates[name]) / workers_of(name):,.0f} | "
              f"{ratio} | {summary(server_cpu[name], 1)} | {summary([s * 1000 / count for s in other_cpu[name]], 2)} |")
    writers = [name for name in ratios if name.startswith("Ray writer")]
    met = {name: statistics.median(ratios[name]) >= 0.85 for name in writers}
    print(f"\ntarget: the Ray writer within 15% of ss.write at equal worker count: "
          f"{'met' if all(met.values()) else 'missed'} ("
          + ", ".join(f"{name.split(', ')[1]} {statistics.median(ratios[name]):.2f}x" for name in writers) + ")")
    now = datetime.datetime.now()
    out = args.json or REPO_ROOT / "benchmarks" / "results" / f"convert-{now.date().isoformat()}.json"
    write_json(out, {"date": now.isoformat(timespec="seconds"), "images": count, "tar_bytes": size,
                     "tar_shards": -(-count // PER_SHARD), "per_tar_shard": PER_SHARD, "shard_size": SHARD_SIZE,
                     "rounds": args.rounds, "images_per_s": rates, "server_cpu_s": server_cpu, "other_cpu_s": other_cpu,
                     "over_write": ratios, "target_met": met})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
