"""Which way to store images: bytes per image, the disk ImageNet-1k would
take, the cost of writing, and loader images/s per core for ImageNet train,
val and multi-crop, for each way ``RGBImageField`` can store a JPEG.

Usage::

    python benchmarks/modes.py [FOLDER] [--rounds R] [--epochs E] [--times T] [--readme]

FOLDER defaults to ``../shared/data/imagenet-sample``; its JPEGs, ``--times``
over (default 2), are written once per mode and size:

* ``byte for byte``: ``RGBImageField(tile_width=None)``, each JPEG as it is
  (re-encoded at quality 90 when ``max_resolution`` shrinks it);
* ``tiled``: ``RGBImageField(tile_width=32)``, the default: the same JPEGs
  re-coded losslessly into restart-marker tiles (the same pixels);
* ``yuv420``: ``RGBImageField(write_mode="yuv420")``, each image's YCbCr
  4:2:0 planes;
* ``raw``: ``RGBImageField(write_mode="raw")``, RGB pixels.

Sizes: the photos as they are, and ``max_resolution`` 512 and 256 (256 is
FFCV's usual ImageNet setting).  For each file: its bytes per image, the
ratio to the byte-for-byte file of the same size, the disk ImageNet-1k's
1,281,167 training images would take at that many bytes per image, and
the write rate (one ``slipstream.write`` call, its worker processes and
fsync included; the fastest of ``--rounds``).  Loader images/s (2 timed
epochs after a warm-up epoch, batch 128, every core) for the photos as they
are and at 256, the modes interleaved in an order that alternates from
round to round; medians over rounds with ranges, the ratios taken round by
round.  2-core timings drift by 10-40% between runs.

Writes ``benchmarks/results/modes-<date>.json``; ``--readme`` also puts the
table into README.md between its ``modes`` markers, and ``--report-only
JSON`` reports an earlier run again.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import slipstream as ss
from slipstream.ops import multi_crop_pipelines, presets
from slipstream.sources import find_jpegs
from common import Repeated, record, summary  # noqa: E402  (benchmarks/, next to this file)

REPO = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = REPO.parent / "shared" / "data" / "imagenet-sample"
IMAGENET_TRAIN = 1_281_167
MODES = {"byte for byte": {"tile_width": None}, "tiled": {"tile_width": 32}, "yuv420": {"write_mode": "yuv420"},
         "raw": {"write_mode": "raw"}}
SIZES = {"as they are": None, "512": 512, "256": 256}
TIMED_SIZES = ("as they are", "256")  # the loader runs on these
SCENARIOS = {"train": lambda: presets.imagenet_train(224), "val": lambda: presets.imagenet_val(224),
             "multi-crop": multi_crop_pipelines}
BATCH = 128
README_START, README_END = "<!-- modes:start -->", "<!-- modes:end -->"


def write(path: Path, samples: Repeated, mode: dict[str, Any], size: int | None) -> float:
    """Seconds one ``slipstream.write`` of ``samples`` into ``path`` takes."""
    start = time.perf_counter()
    ss.write(path, samples, {"image": ss.RGBImageField(max_resolution=size, **mode), "label": ss.IntField()},
             verbose=False, overwrite=True)
    return time.perf_counter() - start


def epoch_rate(path: Path, scenario: str, epochs: int) -> float:
    """Images/s of the median of ``epochs`` timed epochs, after a warm-up
    epoch, counting each batch's images as a training step would."""
    loader = ss.Loader(path, BATCH, {"label": [], **SCENARIOS[scenario]()}, order=ss.Order("random", seed=0),
                       verbose=False)
    rates = []
    for epoch in range(epochs + 1):
        start, images = time.perf_counter(), 0
        for batch in loader:
            images += len(batch[0])
        if epoch:
            rates.append(images / (time.perf_counter() - start))
    return statistics.median(rates)


def measure(folder: Path, rounds: int, epochs: int, times: int, work: Path) -> dict[str, Any]:
    paths = find_jpegs(folder)
    samples = Repeated(paths, times)
    jpeg_bytes = sum(path.stat().st_size for path in paths) * times
    files = {(mode, size): work / f"{mode.replace(' ', '-')}-{size.replace(' ', '-')}.slip"
             for mode in MODES for size in SIZES}
    writes: dict[str, dict[str, list[float]]] = {}
    for r in range(rounds):
        for mode, size in (list(files) if r % 2 == 0 else list(files)[::-1]):
            seconds = write(files[mode, size], samples, MODES[mode], SIZES[size])
            writes.setdefault(size, {}).setdefault(mode, []).append(len(samples) / seconds)
            print(f"  round {r + 1}, write {mode}, {size}: {len(samples) / seconds:,.0f} images/s", flush=True)
    disk = {size: {mode: files[mode, size].stat().st_size for mode in MODES} for size in SIZES}
    rates: dict[str, dict[str, dict[str, list[float]]]] = {}
    for size in TIMED_SIZES:
        for scenario in SCENARIOS:
            for r in range(rounds):
                for mode in (list(MODES) if r % 2 == 0 else list(MODES)[::-1]):
                    rate = epoch_rate(files[mode, size], scenario, epochs)
                    rates.setdefault(size, {}).setdefault(scenario, {}).setdefault(mode, []).append(rate)
                    print(f"  round {r + 1}, {size}, {scenario}, {mode}: {rate:,.0f} images/s", flush=True)
    return {"folder": str(folder), "images": len(samples), "jpeg_bytes": jpeg_bytes, "cores": os.cpu_count(),
            "rounds": rounds, "epochs": epochs, "batch_size": BATCH, "write_images_per_s": writes,
            "file_bytes": disk, "images_per_s": rates}


def _ratios(rates: dict[str, list[float]], mode: str) -> list[float]:
    return [a / b for a, b in zip(rates[mode], rates["byte for byte"])]


def table(result: dict[str, Any]) -> list[str]:
    """The markdown table of ``result``: one line per mode, loader images/s
    per core for the photos as they are and at 256, each with its ratio to
    byte for byte."""
    images, cores = result["images"], result["cores"]
    lines = ["| mode | bytes per image | x byte for byte | ImageNet-1k train at 256 / 512 / as they are | "
             "writing, images/s per core | train, as they are / 256 | val | multi-crop |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for mode in MODES:
        per_image = result["file_bytes"]["as they are"][mode] / images
        ratio = per_image * images / result["file_bytes"]["as they are"]["byte for byte"]
        imagenet = " / ".join(f"{result['file_bytes'][size][mode] / images * IMAGENET_TRAIN / 1e9:,.0f} GB"
                              for size in ("256", "512", "as they are"))
        writing = max(result["write_images_per_s"]["as they are"][mode]) / cores
        cells = []
        for scenario in SCENARIOS:
            sizes = []
            for size in TIMED_SIZES:
                rates = result["images_per_s"][size][scenario]
                beside = "" if mode == "byte for byte" else f" ({statistics.median(_ratios(rates, mode)):.2f}x)"
                sizes.append(f"{statistics.median(rates[mode]) / cores:,.0f}{beside}")
            cells.append(" / ".join(sizes))
        lines.append(f"| {mode} | {per_image / 1e3:,.0f} kB | {ratio:.2f}x | {imagenet} | {writing:,.0f} | "
                     + " | ".join(cells) + " |")
    return lines


def report(result: dict[str, Any]) -> None:
    print(f"\n{result['images']} images ({result['jpeg_bytes'] / result['images'] / 1e3:.0f} kB of JPEG each) "
          f"from {result['folder']}, {result['cores']} cores; loader images/s per core for the photos as they are "
          "and at max_resolution 256, each mode's ratio to byte for byte in parentheses\n")
    print("\n".join(table(result)))
    for size in TIMED_SIZES:
        print(f"\nloader images/s, {size} (median [range] over {result['rounds']} rounds; ratios round by round):")
        for scenario, by_mode in result["images_per_s"][size].items():
            cells = [f"{mode} {summary(rates)}" + ("" if mode == "byte for byte" else
                                                   f" = {summary(_ratios(by_mode, mode), 2)}x")
                     for mode, rates in by_mode.items()]
            print(f"  {scenario}: " + "; ".join(cells))
    print("\nbytes on disk per image, and the ratio to the byte-for-byte file of the same size:")
    for size, by_mode in result["file_bytes"].items():
        base = by_mode["byte for byte"]
        print(f"  {size}: " + "; ".join(f"{mode} {n / result['images'] / 1e3:,.1f} kB ({n / base:.2f}x)"
                                        for mode, n in by_mode.items()))
    print("\nwriting, images/s (fastest of the rounds):")
    for size, by_mode in result["write_images_per_s"].items():
        print(f"  {size}: " + "; ".join(f"{mode} {max(v):,.0f}" for mode, v in by_mode.items()))


def update_readme(result: dict[str, Any]) -> None:
    readme = REPO / "README.md"
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        raise SystemExit(f"README.md has no {README_START} ... {README_END} markers")
    head, rest = text.split(README_START, 1)
    tail = rest.split(README_END, 1)[1]
    readme.write_text(head + README_START + "\n" + "\n".join(table(result)) + "\n" + README_END + tail)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs per loader run (default 2)")
    parser.add_argument("--times", type=int, default=2, help="how many times over the folder's JPEGs (default 2)")
    parser.add_argument("--readme", action="store_true", help="put the table into README.md")
    parser.add_argument("--report-only", type=Path, default=None, help="report this earlier run's JSON again")
    args = parser.parse_args(argv)
    if args.report_only:
        result = json.loads(args.report_only.read_text())
        report(result)
    else:
        with tempfile.TemporaryDirectory(prefix="modes-") as work:
            result = measure(args.folder, args.rounds, args.epochs, args.times, Path(work))
        out = record(result, "modes")
        report(result)
        print(f"\nwrote {out}")
    if args.readme:
        update_readme(result)
        print("updated README.md's table of modes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
