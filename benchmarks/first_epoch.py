"""Training from an image folder that has no dataset file yet: the first
epoch streaming from the folder, against converting first, against the
PyTorch DataLoader with Pillow.

Usage::

    python benchmarks/first_epoch.py [FOLDER] [--images N] [--rounds R] [--batch B] [--s3] [--json PATH]

FOLDER's JPEGs (default ``../shared/data/imagenet-sample``) are linked
``--images`` times over (default 20,000) into a class tree of 8 folders
under ``benchmarks/.data``.  Each run is a fresh process with an empty
dataset cache, training two epochs of ImageNet-train (RandomResizedCrop 224,
flip, normalize to float16; batches of ``--batch``, default 128, in random
order) and taking each batch as a training step would, nothing more:

- ``slipstream, from the folder``: ``ss.Loader(folder, ...)``: the first
  epoch reads the folder while the dataset file is written
  (:mod:`slipstream.loader.first_epoch`), the second reads the file;
- ``slipstream, convert then train``: ``ss.cached(folder)`` (``ss.write``
  with its default workers), then ``ss.Loader(path, ...)``;
- ``slipstream, from tar shards``: ``ss.Loader(shards, ...)`` over the same
  images as WebDataset tar shards of 1,000 samples on local disk (made once
  with :mod:`tarfile`): the first epoch streams the shards in their order
  through a bounded shuffle (:func:`slipstream.loader.orders.stream_order`);
- with ``--s3``, ``slipstream, from tar shards in S3``: the same shards in
  an S3 server on this machine (SeaweedFS, from ``tests/object_store.py``),
  each with the ``_stats.json`` img2dataset writes beside it, which counts
  its samples: ``ss.Loader("s3://...", ...)`` streams the first epoch from
  the server; and ``slipstream, from uncounted tar shards in S3``: the same
  shards without the stats, whose length the first epoch learns at the
  stream's end (its batches formed as the shards are read);
- ``DataLoader + Pillow``: ``torch.utils.data.DataLoader`` over the folder,
  2 workers, Pillow decoding and the same crop (the peer of
  ``benchmarks/compare.py``).

Times count from the start of the run (before the loader or the conversion
starts): the first batch, each epoch's images/s, and the two epochs
together; for the slipstream runs, each epoch's CPU time per image (every
thread of the process: where epoch 0's extra work shows).  An untimed run
first compiles the pipeline into the stage cache, so no run pays for
compiling; the first batch of a loader over the finished file is measured
too (what the pipeline's start costs without any first
epoch).  Runs alternate their order from round to round; medians and ranges
over ``--rounds`` (default 2).  2-core timings drift by 10-40%.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import cpu_seconds, record, summary  # benchmarks/, next to this file

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = REPO_ROOT.parent / "shared" / "data" / "imagenet-sample"
DATA = REPO_ROOT / "benchmarks" / ".data"
SYSTEMS = ("slipstream, from the folder", "slipstream, convert then train", "slipstream, from tar shards",
           "DataLoader + Pillow")
S3_SYSTEM = "slipstream, from tar shards in S3"
S3_UNCOUNTED_SYSTEM = "slipstream, from uncounted tar shards in S3"
SHARD_SAMPLES = 1000
S3_SHARDS = "s3://bench/first-epoch-shards"
S3_UNCOUNTED_SHARDS = "s3://bench/first-epoch-uncounted-shards"
CLASSES = 8


def build_folder(source: Path, count: int) -> Path:
    """``count`` hard links of ``source``'s JPEGs in a class tree (made once)."""
    folder = DATA / f"first-epoch-{count}"
    done = folder / ".complete"
    if done.exists():
        return folder
    photos = sorted(p for p in source.rglob("*") if p.suffix.lower() in (".jpeg", ".jpg"))
    for k in range(count):
        target = folder / f"c{k % CLASSES}" / f"{k:06d}.jpg"
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            os.link(photos[k % len(photos)], target)
    done.write_text("")
    return folder


def build_shards(folder: Path) -> Path:
    """The folder's images as WebDataset tar shards (``.jpg`` and ``.cls``
    members), in the folder's sorted order (made once)."""
    import tarfile

    shards = folder.with_name(folder.name + "-shards")
    done = shards / ".complete"
    if done.exists():
        return shards
    shards.mkdir(exist_ok=True)
    photos = sorted(folder.rglob("*.jpg"))
    for start in range(0, len(photos), SHARD_SAMPLES):
        with tarfile.open(shards / f"shard-{start // SHARD_SAMPLES:06d}.tar", "w", format=tarfile.USTAR_FORMAT) as tar:
            for k, photo in enumerate(photos[start:start + SHARD_SAMPLES], start):
                # Each member written from its bytes: tar.add() would store the folder's hard links as links.
                for name, data in ((f"{k:06d}.jpg", photo.read_bytes()), (f"{k:06d}.cls",
                                                                          f"{photo.parent.name[1:]}\n".encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    done.write_text("")
    return shards


def child(system: str, folder: Path, batch: int, seed: int) -> None:
    """One timed run, in this process; prints its JSON line."""
    start = time.perf_counter()
    import slipstream as ss
    from slipstream.ops import presets

    marks: dict[str, float] = {}
    if system == "DataLoader + Pillow":
        epochs = _dataloader_epochs(folder, batch, seed)
    else:
        source = {"slipstream, convert then train": lambda: ss.cached(folder, verbose=False),
                  "slipstream, from tar shards": lambda: build_shards(folder),
                  S3_SYSTEM: lambda: S3_SHARDS, S3_UNCOUNTED_SYSTEM: lambda: S3_UNCOUNTED_SHARDS,
                  }.get(system, lambda: folder)()
        # The S3 server's address and keys come in the environment (AWS_*), as on a cloud machine.
        in_s3 = system in (S3_SYSTEM, S3_UNCOUNTED_SYSTEM)
        loader = ss.Loader(source, batch, presets.imagenet_train(224), order=ss.Order("random", seed=seed),
                           remote=ss.Remote(cache_dir=DATA / "cache" / "pages") if in_s3 else None, verbose=False)
        epochs = loader
    counts = []
    for e in range(2):
        count = 0
        epoch_start, cpu_start = time.perf_counter(), cpu_seconds(os.getpid())
        for images, labels in (epochs(e) if callable(epochs) else epochs):
            if "first_batch" not in marks:
                marks["first_batch"] = time.perf_counter() - start
            count += len(labels)
        marks[f"epoch{e}_s"] = time.perf_counter() - epoch_start
        # The DataLoader's work is in its worker processes, which this process cannot time per epoch.
        marks[f"epoch{e}_cpu_s"] = None if callable(epochs) else cpu_seconds(os.getpid()) - cpu_start
        counts.append(count)
    marks["total_s"] = time.perf_counter() - start
    print(json.dumps({"images": counts, **marks}))


def _dataloader_epochs(folder: Path, batch: int, seed: int):
    """The DataLoader peer: an epoch function over the folder."""
    import torch
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset

    sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
    from dataloader_runner import train_view

    class Folder(Dataset):
        def __init__(self) -> None:
            self.samples = [(p, int(p.parent.name[1:])) for p in sorted(folder.rglob("*.jpg"))]

        def __len__(self) -> int:
            return len(self.samples)

        def __getitem__(self, index: int):
            path, label = self.samples[index]
            with Image.open(path) as img:
                return train_view(img.convert("RGB"), 224, (0.08, 1.0)), label

    torch.manual_seed(seed)
    loader = DataLoader(Folder(), batch_size=batch, shuffle=True, num_workers=2, persistent_workers=True,
                        prefetch_factor=2)
    return lambda epoch: loader


def upload_shards(shards: Path, server: Any) -> None:
    """The shards into the S3 server, each with img2dataset's stats beside
    it, and again without them (under another prefix)."""
    import slipstream as ss
    from slipstream.format.objectstore import ObjectPrefix

    server.create_bucket("bench", exist_ok=True)
    remote = ss.Remote(storage_options=server.storage_options())
    prefix, uncounted = ObjectPrefix(S3_SHARDS, remote), ObjectPrefix(S3_UNCOUNTED_SHARDS, remote)
    for tar in sorted(shards.glob("*.tar")):
        prefix.put_file(tar.name, tar)
        uncounted.put_file(tar.name, tar)
        count = ss.WebDataset(tar).length_hint()  # from the tar headers
        stats = {"count": count, "successes": count, "failed_to_download": 0, "failed_to_resize": 0}
        prefix.put_bytes(f"{tar.stem}_stats.json", json.dumps(stats).encode())


def run(system: str, folder: Path, batch: int, seed: int, keep_file: bool = False,
        env: dict[str, str] | None = None) -> dict:
    """One run in a fresh process (``env`` added to its environment), with
    the compiled stages of earlier runs and, unless ``keep_file``, no
    dataset file (nor downloaded pages)."""
    cache = DATA / "cache"
    if not keep_file:
        shutil.rmtree(cache / "datasets", ignore_errors=True)
        shutil.rmtree(cache / "pages", ignore_errors=True)
    env = {**os.environ, **(env or {}), "SLIPSTREAM_CACHE_DIR": str(cache)}
    with tempfile.TemporaryDirectory(prefix="slipstream-first-epoch-") as tmp:
        out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", system, str(folder),
                              "--batch", str(batch), "--seed", str(seed)], capture_output=True, text=True, env=env,
                             cwd=tmp)
    if out.returncode:
        raise RuntimeError(f"{system} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER, help="folder of JPEGs")
    parser.add_argument("--images", type=int, default=20000, help="images in the folder trained on (default 20000)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds (default 2)")
    parser.add_argument("--batch", type=int, default=128, help="batch size (default 128)")
    parser.add_argument("--s3", action="store_true", help="also the shards in an S3 server on this machine")
    parser.add_argument("--json", type=Path, default=None, help="output JSON (default: benchmarks/results/)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child, args.folder, args.batch, args.seed)
        return 0
    folder = build_folder(args.folder, args.images)
    shards = build_shards(folder)
    systems = SYSTEMS[:3] + ((S3_SYSTEM, S3_UNCOUNTED_SYSTEM) if args.s3 else ()) + SYSTEMS[3:]
    with contextlib.ExitStack() as stack:
        env: dict[str, dict[str, str]] = {}
        if args.s3:
            sys.path.insert(0, str(REPO_ROOT / "tests"))
            from object_store import S3Server

            shutil.rmtree(DATA / "s3-first-epoch", ignore_errors=True)
            server = stack.enter_context(S3Server(DATA / "s3-first-epoch"))
            upload_shards(shards, server)
            env[S3_SYSTEM] = env[S3_UNCOUNTED_SYSTEM] = server.env()
        run("slipstream, convert then train", folder, args.batch, 0)  # compiles the stages, writes the file
        file_start = [run("slipstream, convert then train", folder, args.batch, 0, keep_file=True)["first_batch"]
                      for _ in range(args.rounds)]  # the file exists: the first batch of a warm start
        runs: dict[str, list[dict]] = {system: [] for system in systems}
        for r in range(args.rounds):
            for system in (systems if r % 2 == 0 else systems[::-1]):
                runs[system].append(run(system, folder, args.batch, r + 1, env=env.get(system)))
    images = args.images
    print(f"{images:,} JPEGs of {args.folder} (linked), ImageNet-train 224, batch {args.batch}, random order, two "
          f"epochs from nothing, {args.rounds} rounds, {os.cpu_count()} cores")
    print(f"  first batch over the finished file (the pipeline's start, stages compiled): {summary(file_start, 2)} s")
    print(f"  {'system':<44} {'first batch s':>18} {'epoch 0 img/s':>20} {'epoch 1 img/s':>20} {'two epochs s':>18}")
    for system, results in runs.items():
        print(f"  {system:<44} {summary([x['first_batch'] for x in results], 2):>18} "
              f"{summary([images / x['epoch0_s'] for x in results]):>20} "
              f"{summary([images / x['epoch1_s'] for x in results]):>20} "
              f"{summary([x['total_s'] for x in results], 1):>18}")
    print(f"\n  {'CPU ms per image (every thread of the training process)':<58} {'epoch 0':>14} {'epoch 1':>14}")
    for system in systems[:-1]:  # the DataLoader's work is in its workers
        per_epoch = [summary([1000 * x[f"epoch{e}_cpu_s"] / images for x in runs[system]], 3) for e in range(2)]
        print(f"  {system:<58} {per_epoch[0]:>14} {per_epoch[1]:>14}")
    convert = runs["slipstream, convert then train"]

    def streaming_targets(system: str, label: str) -> list[tuple[str, str, bool]]:
        first_extra = [x["first_batch"] - statistics.median(file_start) for x in runs[system]]
        epoch_ratio = [(images / s["epoch0_s"]) / (images / c["epoch1_s"]) for s, c in zip(runs[system], convert)]
        return [(f"{label}first batch within 2 s of the pipeline's start", f"{summary(first_extra, 2)} s more",
                 max(first_extra) <= 2),
                (f"{label}epoch 0 >= 0.7x a warm file epoch", f"{summary(epoch_ratio, 2)}x", min(epoch_ratio) >= 0.7)]

    total_ratio = [s["total_s"] / c["total_s"] for s, c in zip(runs[SYSTEMS[0]], convert)]
    targets = streaming_targets(SYSTEMS[0], "") + [
        ("two epochs from nothing <= 0.6x convert then train", f"{summary(total_ratio, 2)}x", max(total_ratio) <= 0.6),
    ] + streaming_targets(SYSTEMS[2], "tar shards: ")
    if args.s3:
        targets += streaming_targets(S3_SYSTEM, "tar shards in S3: ") + \
            streaming_targets(S3_UNCOUNTED_SYSTEM, "uncounted tar shards in S3: ")
    print("\n  target | measured (paired by round) | met")
    for name, measured, met in targets:
        print(f"  {name} | {measured} | {'yes' if met else 'no'}")
    path = record({"folder": str(args.folder), "images": images, "batch": args.batch, "rounds": args.rounds,
                   "file_first_batch_s": file_start, "runs": runs,
                   "targets": [{"target": n, "measured": m, "met": bool(ok)} for n, m, ok in targets]},
                  "first_epoch", args.json)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
