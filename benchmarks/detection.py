"""Detection training throughput: slipstream against NVIDIA DALI on CPU and
the PyTorch DataLoader + Pillow, same data, same pipeline, same run.

Usage::

    python benchmarks/detection.py [--images FOLDER] [--size 300|512] [--batch-size 64]
                                   [--repeats 3] [--epochs 3] [--systems ...]

The pipeline, identical in all three systems (SSD-style): read a COCO-format
dataset (JPEGs + instances JSON); torchvision v2 ``RandomIoUCrop``'s
bbox-aware crop (minimum IoU drawn from {0, 0.1, 0.3, 0.5, 0.7, 0.9, no
crop}, each side scaled by [0.3, 1], window aspect ratio in [0.5, 2], 40
trials per option, boxes whose centres fall outside dropped with their
labels); horizontal flip p = 0.5 of image and boxes; bilinear resize to
``size`` x ``size``; ImageNet mean/std to float16 CHW; boxes as a padded
(B, max_boxes, 4) float32 XYXY tensor in output pixels, labels
(B, max_boxes) int64, counts (B,) int64, ``max_boxes`` being the dataset's
most boxes in an image.  How each system does it: the runners' docstrings
(``benchmarks/peers/*_detection_runner.py``) and RUNNERS.md, "Detection".

Data: the JPEGs of ``--images`` (default ``../shared/data/imagenet-sample``,
800 ImageNet images) with generated annotations: 1 to 12 boxes per image
(log-uniform size and aspect ratio, uniform position, one of 80 categories),
seeded by ``--seed``, written once as a COCO instances file under
``benchmarks/.data/detection/``, which DALI and the DataLoader read, and as
two slipstream files of the same boxes: the JPEGs re-coded losslessly into
32-pixel restart-marker tiles (system ``slipstream``, as in the
classification comparison of ``compare.py``: a crop entropy-decodes only
the tiles it touches) and the JPEGs byte for byte (``slipstream-bytes``,
the file ``ss.write`` makes by default).

Every measurement runs in a fresh process of the system's own environment
(DALI and the DataLoader: ``benchmarks/.venvs/``, made by ``make
bench-peers`` or ``benchmarks/peers/install-*.sh``; slipstream: this
interpreter): first once in ``--check`` mode, whose outputs are verified
(shapes and dtypes, boxes within [0, size], counts within [1, max_boxes],
padding zero, labels valid) and whose mean number of boxes kept per image
is compared across systems; then ``--repeats`` rounds that run every
system once each, the order rotating from round to round so that machine
drift hits all alike; each run is one untimed warm-up epoch and
``--epochs`` timed ones that only count the images of each batch, as a
training step receiving them would.  The report gives, per system, the
median over rounds of each run's median epoch, with the range, and the
ratios of slipstream to the others (per round, median and range).

Writes ``benchmarks/results/detection-<date>.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "peers")]

# benchmarks/ and benchmarks/peers/, put on sys.path just above.
from bytesets import TILE_WIDTH
from common import machine_cpu_seconds, summary, write_json
from compare import DEFAULT_FOLDER, PEERS, REPO, VENVS, available, machine, run
from peer_common import JPEG_SUFFIXES, read_coco

DATA = REPO / "benchmarks" / ".data" / "detection"
CATEGORIES = 80
MAX_BOXES_PER_IMAGE = 12
BOX_SIDE = (0.05, 0.8)  # sqrt(box area / image area), drawn log-uniformly
BOX_ASPECT = (1 / 3, 3.0)  # box width / height, drawn log-uniformly
AGREEMENT = 0.1  # the check's statistics over 2 epochs vary by about 2%; a different crop moves them more
TARGETS = {"dali": 3.0, "dataloader": 5.0}  # slipstream's aim, as a multiple of each system's samples/s
SEMANTIC_DIFFERENCES = [
    ("DALI's random_bbox_crop accepts a window when any box reaches the minimum IoU with it (max over all boxes, "
     "all_boxes_above_threshold=False) and at least one box has its centre inside; torchvision, the DataLoader and "
     "slipstream take the IoU only over the boxes whose centres are inside, so DALI accepts a few more windows"),
    ("DALI draws the window in continuous coordinates relative to the image (image_slice rounds it to pixels and the "
     "boxes follow the unrounded window); torchvision, the DataLoader and slipstream draw integer pixel sizes and "
     "offsets"),
    ("slipstream gives up after 50 draws of the minimum IoU without a window and keeps the whole image; torchvision, "
     "the DataLoader and DALI draw until one succeeds (every image here has a box, so this almost never matters)"),
    ("pixels: slipstream decodes only the window, at the coarsest JPEG DCT scale that still covers the output, then "
     "resizes with an antialiased bilinear (triangle) filter; the DataLoader decodes the full image and crops + "
     "resizes in one Pillow BILINEAR resize (antialiased); DALI decodes the window (image_slice) and resizes with "
     "its antialiased linear filter: same geometry, slightly different pixel values"),
    ("DALI's reader pads the last batch of an epoch (ceil(N / batch) * batch samples processed for N counted: 832 "
     "for 800 with batches of 64) and shuffles through a 1024-sample buffer (all of the 800 default images); the "
     "DataLoader and slipstream process N"),
    "each system draws from its own random generator: the same distributions, not the same samples",
]
DRIFT_NOTE = ("timings on a 2-core machine drift by 10-40% from run to run (other load, frequency, caches); "
              "compare medians within one run of this script, whose rounds interleave the systems")


def systems() -> dict[str, dict[str, Any]]:
    """Every system: interpreter, runner and which copy of the data it reads."""
    return {
        # slipstream's own file, as in the classification comparison (compare.py): the JPEGs re-coded losslessly
        # into restart-marker tiles, so that a crop entropy-decodes only the tiles it touches; and the JPEGs
        # byte for byte, the file ss.write makes by default.
        "slipstream": {"python": sys.executable, "runner": PEERS / "slipstream_detection_runner.py",
                       "data": "tiled"},
        "slipstream-bytes": {"python": sys.executable, "runner": PEERS / "slipstream_detection_runner.py",
                             "data": "slip"},
        "dali": {"python": VENVS / "dali" / "bin" / "python", "runner": PEERS / "dali_detection_runner.py",
                 "data": "coco"},
        "dataloader": {"python": VENVS / "dataloader" / "bin" / "python",
                       "runner": PEERS / "dataloader_detection_runner.py", "data": "coco"},
    }


# ---------------------------------------------------------------- data


def image_files(folder: Path) -> list[Path]:
    """The folder's JPEGs, flat or one level of sub-folders, sorted."""
    paths = sorted(p for p in folder.rglob("*")
                   if p.is_file() and p.suffix.lower() in JPEG_SUFFIXES and len(p.relative_to(folder).parts) <= 2)
    if not paths:
        raise SystemExit(f"detection: no JPEG files in {folder}")
    return paths


def random_boxes(width: int, height: int, rng: Any) -> tuple[list[list[float]], list[int]]:
    """1 to MAX_BOXES_PER_IMAGE boxes (XYXY, absolute, rounded to 1/100 px)
    inside a ``width`` x ``height`` image, and a category id (1 to
    CATEGORIES) each."""
    boxes, labels = [], []
    for _ in range(int(rng.integers(1, MAX_BOXES_PER_IMAGE + 1))):
        side = math.exp(rng.uniform(math.log(BOX_SIDE[0]), math.log(BOX_SIDE[1]))) * math.sqrt(width * height)
        aspect = math.exp(rng.uniform(math.log(BOX_ASPECT[0]), math.log(BOX_ASPECT[1])))
        w = min(float(width), max(1.0, side * math.sqrt(aspect)))
        h = min(float(height), max(1.0, side / math.sqrt(aspect)))
        x0, y0 = rng.uniform(0, width - w), rng.uniform(0, height - h)
        boxes.append([round(x0, 2), round(y0, 2), round(min(x0 + w, width), 2), round(min(y0 + h, height), 2)])
        labels.append(int(rng.integers(1, CATEGORIES + 1)))
    return boxes, labels


def write_coco(folder: Path, out: Path, seed: int) -> None:
    """A COCO instances file for ``folder``'s JPEGs with generated boxes
    (``file_name`` relative to ``folder``), written atomically."""
    from PIL import Image

    images, annotations = [], []
    for index, path in enumerate(image_files(folder)):
        with Image.open(path) as im:
            width, height = im.size
        boxes, labels = random_boxes(width, height, np.random.default_rng([seed, index]))
        image_id = index + 1
        images.append({"id": image_id, "file_name": str(path.relative_to(folder)), "width": width, "height": height})
        for (x0, y0, x1, y1), label in zip(boxes, labels):
            w, h = round(x1 - x0, 2), round(y1 - y0, 2)
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": label,
                                "bbox": [x0, y0, w, h], "area": round(w * h, 4), "iscrowd": 0})
    categories = [{"id": c, "name": f"class_{c}", "supercategory": "none"} for c in range(1, CATEGORIES + 1)]
    write_json(out, {"info": {"description": f"generated boxes for {folder}, seed {seed}"},
                     "images": images, "annotations": annotations, "categories": categories})


class DetectionSource:
    """``(image_path, boxes (n, 4) float32 XYXY, labels (n,) int64)`` per
    image of a COCO instances file, for :func:`slipstream.write` (plain
    lists inside, so that it pickles for the writer's workers)."""

    def __init__(self, folder: Path, annotations: Path) -> None:
        self.samples = [(str(folder / name), boxes, labels) for name, boxes, labels in read_coco(annotations)]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[str, Any, Any]:
        path, boxes, labels = self.samples[index]
        return path, np.array(boxes, np.float32).reshape(-1, 4), np.array(labels, np.int64)


def prepare_data(folder: Path, seed: int) -> dict[str, Any]:
    """The COCO file and the slipstream file of ``folder`` with boxes of
    ``seed`` (made on first use, under ``benchmarks/.data/detection/``), and
    what the runners need to know about them."""
    import slipstream as ss

    key = hashlib.sha1(str(folder.resolve()).encode()).hexdigest()[:8]
    base = DATA / f"{folder.name}-{key}-seed{seed}"
    annotations, slip = base / "instances.json", base / "data.slip"
    if not annotations.exists():
        print(f"writing {annotations}", flush=True)
        write_coco(folder, annotations, seed)
    if not slip.exists():
        print(f"writing {slip}", flush=True)
        ss.write(slip, DetectionSource(folder, annotations),
                 fields={"image": ss.RGBImageField(), "boxes": ss.RaggedField(np.float32, (4,)),
                         "labels": ss.RaggedField(np.int64)}, verbose=False)
    tiled = base / f"data-tiles{TILE_WIDTH}.slip"
    if not tiled.exists():
        print(f"writing {tiled}", flush=True)
        ss.convert(slip, tiled, tile_width=TILE_WIDTH, verbose=False)
    counts = [len(labels) for _, _, labels in read_coco(annotations)]
    return {"images": folder, "annotations": annotations, "slip": slip, "tiled": tiled, "max_boxes": max(counts),
            "image_count": len(counts), "boxes": sum(counts), "mean_boxes_per_image": sum(counts) / len(counts)}


# ---------------------------------------------------------------- measuring


def spec(system: dict[str, Any], data: dict[str, Any], args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """The SPEC.json of one run of ``system`` (RUNNERS.md, "Detection")."""
    where = ({"data": str(data[system["data"]])} if system["data"] in ("slip", "tiled")
             else {"images": str(data["images"]), "annotations": str(data["annotations"])})
    return {"scenario": "detection", **where, "size": args.size, "max_boxes": data["max_boxes"],
            "batch_size": args.batch_size, "threads": args.threads, "epochs": args.epochs, "warmup_epochs": 1,
            "check_epochs": args.check_epochs, **extra}


def verify(check: dict[str, Any], size: int, batch: int, max_boxes: int) -> list[str]:
    """What is wrong with a runner's ``check`` (empty when nothing): shapes
    and dtypes of the first batch; every kept box within [0, size] with a
    positive area and counts within [1, max_boxes] (every image has a box,
    and the crop keeps at least one), over all the check's epochs; in the
    first batch also padding rows zero and labels 1 to CATEGORIES."""
    problems = []
    expected = {"image": ([batch, 3, size, size], ("torch.float16", "torch.float32")),
                "boxes": ([batch, max_boxes, 4], ("torch.float32",)),
                "labels": ([batch, max_boxes], ("torch.int64",)),
                "counts": ([batch], ("torch.int64",))}
    for name, (shape, dtypes) in expected.items():
        if check.get(f"{name}_shape") != shape:
            problems.append(f"{name} shape {check.get(f'{name}_shape')}, expected {shape}")
        if check.get(f"{name}_dtype") not in dtypes:
            problems.append(f"{name} dtype {check.get(f'{name}_dtype')}, expected {' or '.join(dtypes)}")
    if problems:
        return problems
    if check["boxes_outside"]:
        problems.append(f"{check['boxes_outside']} kept boxes over the check's epochs are not boxes within [0, {size}]")
    if not 1 <= check["min_count"] <= check["max_count"] <= max_boxes:
        problems.append(f"counts over the check's epochs range from {check['min_count']} to {check['max_count']}, "
                        f"not within [1, {max_boxes}]")
    tolerance = 1e-3 * size
    for i, (rows, labels, n) in enumerate(zip(check["boxes"], check["labels"], check["counts"])):
        if not 1 <= n <= max_boxes:
            problems.append(f"sample {i}: count {n} outside [1, {max_boxes}]")
            continue
        for j, ((x0, y0, x1, y1), label) in enumerate(zip(rows, labels)):
            if j >= n:
                if (x0, y0, x1, y1, label) != (0, 0, 0, 0, 0):
                    problems.append(f"sample {i}: padding row {j} is {[x0, y0, x1, y1]} label {label}, not zero")
            elif not (-tolerance <= x0 < x1 <= size + tolerance and -tolerance <= y0 < y1 <= size + tolerance):
                problems.append(f"sample {i}: box {j} {[x0, y0, x1, y1]} not a box within [0, {size}]")
            elif not 1 <= label <= CATEGORIES:
                problems.append(f"sample {i}: box {j} has label {label}, outside [1, {CATEGORIES}]")
    return problems


def check_systems(names: list[str], chosen: dict[str, dict[str, Any]], data: dict[str, Any],
                  args: argparse.Namespace) -> dict[str, Any]:
    """Run every system once in check mode; what each returned, verified."""
    checks: dict[str, Any] = {}
    batch = min(args.batch_size, data["image_count"])
    for name in names:
        out = run(chosen[name], spec(chosen[name], data, args, check=True))
        if "error" in out:
            checks[name] = {"error": out["error"]}
            print(f"  check, {name}: ERROR {out['error'].strip().splitlines()[-1][:300]}", flush=True)
            continue
        check = out["check"]
        problems = verify(check, args.size, batch, data["max_boxes"])
        first_kept = statistics.mean(check["counts"]) if check.get("counts") else None
        checks[name] = {"problems": problems, "epochs": check["epochs"], "epoch_images": check["epoch_images"],
                        "mean_boxes_kept": check["mean_boxes_kept"], "first_batch_mean_boxes_kept": first_kept,
                        "mean_box_area_fraction": check["mean_box_area_fraction"],
                        "image_dtype": check["image_dtype"], "first_batch_boxes": check["boxes"][:2],
                        "first_batch_counts": check["counts"]}
        state = "ok" if not problems else f"{len(problems)} problems: " + "; ".join(problems[:5])
        print(f"  check, {name}: {state}; boxes kept per image {check['mean_boxes_kept']:.2f} "
              f"(first batch {first_kept:.2f}, {check['epoch_images']} images over {check['epochs']} epochs), "
              f"kept box area {100 * check['mean_box_area_fraction']:.1f}% of the image", flush=True)
    for key, what in (("mean_boxes_kept", "boxes kept per image"), ("mean_box_area_fraction", "kept box area")):
        values = {name: c[key] for name, c in checks.items() if c.get(key) is not None}
        if len(values) > 1:
            middle = statistics.median(values.values())
            far = [name for name, v in values.items() if abs(v - middle) > AGREEMENT * middle]
            if far:
                print(f"  warning: {what} of {', '.join(far)} differs from the median of the systems by more than "
                      f"{AGREEMENT:.0%}: the crops' semantics may differ", flush=True)
    return checks


def measure(names: list[str], chosen: dict[str, dict[str, Any]], data: dict[str, Any],
            args: argparse.Namespace) -> dict[str, Any]:
    """``args.repeats`` rounds of one run per system, the order rotating."""
    results: dict[str, Any] = {name: {"samples_per_s": [], "epoch_samples_per_s": [], "cpu_ms_per_sample": [],
                                      "rss_mb": [], "rounds": [], "others_cpu_share": []} for name in names}
    errors, settings, versions = [], {}, {}
    for repeat in range(args.repeats):
        order = names[repeat % len(names):] + names[:repeat % len(names)]  # rotate: drift hits all
        for name in order:
            out, others = run_measuring_others(chosen[name], spec(chosen[name], data, args))
            if "error" in out:
                errors.append({"system": name, "round": repeat + 1, "error": out["error"]})
                print(f"  round {repeat + 1}, {name}: ERROR {out['error'].strip().splitlines()[-1][:300]}",
                      flush=True)
                continue
            entry = results[name]
            entry["samples_per_s"].append(statistics.median(out["epoch_images_per_s"]))
            entry["epoch_samples_per_s"].append(out["epoch_images_per_s"])
            entry["cpu_ms_per_sample"].append(1000 * out["cpu_seconds_per_image"])
            entry["rss_mb"].append(out["peak_rss_mb"])
            entry["rounds"].append(repeat + 1)
            entry["others_cpu_share"].append(others)
            settings[name], versions[name] = out.get("settings", {}), out.get("version")
            print(f"  round {repeat + 1}, {name}: {entry['samples_per_s'][-1]:,.0f} samples/s "
                  f"(other processes used {others:.0%} of the machine's CPU meanwhile)", flush=True)
    for entry in results.values():
        if entry["samples_per_s"]:
            rates = entry["samples_per_s"]
            entry.update(median=statistics.median(rates), min=min(rates), max=max(rates))
    return {"throughput": results, "ratios": ratios(results), "errors": errors, "settings": settings,
            "versions": versions}


def run_measuring_others(system: dict[str, Any], run_spec: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """One runner process (``compare.run``) and the share of the machine's
    CPU time that other processes took while it ran: the machine's busy CPU
    seconds less those of the runner and its children (reaped with it), over
    the wall time times the cores.  It tells a run slowed by other work from
    a slow one."""
    def own() -> float:
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return kids.ru_utime + kids.ru_stime

    busy, mine, started = machine_cpu_seconds(), own(), time.monotonic()
    out = run(system, run_spec)
    wall = time.monotonic() - started
    others = (machine_cpu_seconds() - busy) - (own() - mine)
    return out, max(0.0, others / (wall * (os.cpu_count() or 1)))


def ratios(results: dict[str, Any]) -> dict[str, Any]:
    """slipstream's samples/s over each other system's: the ratio of the
    medians, and per round (the runs of one round are closest in time) its
    median and range, with the target."""
    out: dict[str, Any] = {}
    for variant in ("slipstream", "slipstream-bytes"):
        mine = results.get(variant)
        if not mine or not mine["samples_per_s"]:
            continue
        by_round = dict(zip(mine["rounds"], mine["samples_per_s"]))
        for name, entry in results.items():
            if name.startswith("slipstream") or not entry["samples_per_s"]:
                continue
            per_round = [by_round[r] / rate for r, rate in zip(entry["rounds"], entry["samples_per_s"])
                         if r in by_round]
            out[f"{variant} / {name}"] = {
                "of_medians": mine["median"] / entry["median"],
                "per_round": per_round,
                "per_round_median": statistics.median(per_round) if per_round else None,
                "target": TARGETS.get(name),
            }
    return out


def table(report: dict[str, Any]) -> str:
    """The results as a text table."""
    throughput = report["results"]["throughput"]
    checks = report["check"]
    lines = [(f"{'system':<16} {'samples/s: median [range]':>28} {'CPU ms/sample':>14} {'peak RSS MB':>12} "
              f"{'boxes kept/img':>15} {'box area %':>11} {'others CPU %':>13}")]
    for name, entry in throughput.items():
        check = checks.get(name, {})
        kept = f"{check['mean_boxes_kept']:.2f}" if check.get("mean_boxes_kept") is not None else "-"
        area = f"{100 * check['mean_box_area_fraction']:.1f}" if check.get("mean_box_area_fraction") else "-"
        if not entry["samples_per_s"]:
            lines.append(f"{name:<16} {'(no successful run)':>28}")
            continue
        others = 100 * statistics.median(entry["others_cpu_share"])
        lines.append(f"{name:<16} {summary(entry['samples_per_s']):>28} "
                     f"{statistics.median(entry['cpu_ms_per_sample']):>14.2f} "
                     f"{statistics.median(entry['rss_mb']):>12,.0f} {kept:>15} {area:>11} {others:>13.0f}")
    lines.append(f"{'annotations':<16} {'':>28} {'':>14} {'':>12} {report['data']['mean_boxes_per_image']:>15.2f}")
    for pair, ratio in report["results"]["ratios"].items():
        per_round = ratio["per_round"]
        spread = f" (per round {summary(per_round, 2)})" if per_round else ""
        target = f", target >= {ratio['target']:g}x" if ratio["target"] else ""
        lines.append(f"{pair}: {ratio['of_medians']:.2f}x{spread}{target}")
    lines.append("others CPU %: the median share of the machine's CPU time other processes took during the runs")
    lines.append(f"note: {DRIFT_NOTE}")
    return "\n".join(lines)


def commit() -> str | None:
    """The checkout's commit (with ``+changes`` when its tracked files differ
    from it), or None outside a git checkout."""
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], check=False, capture_output=True, text=True)
    if head.returncode != 0:
        return None
    dirty = subprocess.run(["git", "-C", str(REPO), "diff", "--quiet", "HEAD"], check=False).returncode != 0
    return head.stdout.strip() + ("+changes" if dirty else "")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=Path, default=DEFAULT_FOLDER, help="folder of JPEGs (default: %(default)s)")
    parser.add_argument("--size", type=int, default=300, choices=(300, 512), help="output side (SSD300 or SSD512)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="threads or worker processes per system (default: all cores)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of one run per system (default 3)")
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs per run (default 3)")
    parser.add_argument("--check-epochs", type=int, default=2,
                        help="epochs over which the check counts the boxes kept (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated boxes (default 0)")
    parser.add_argument("--systems", nargs="*", default=list(systems()), choices=list(systems()))
    args = parser.parse_args(argv)

    chosen = {name: s for name, s in systems().items() if name in args.systems}
    skipped = {name: why for name, s in chosen.items() if (why := available(s))}
    for name, why in skipped.items():
        print(f"skipping {name}: {why}", flush=True)
    names = [name for name in chosen if name not in skipped]
    if not names:
        raise SystemExit("detection: no system can run")
    data = prepare_data(args.images, args.seed)
    print(f"{data['image_count']} images, {data['boxes']} boxes ({data['mean_boxes_per_image']:.2f} per image, "
          f"at most {data['max_boxes']}), {args.size}x{args.size}, batches of {args.batch_size}, "
          f"{args.threads} threads", flush=True)
    started = datetime.now().astimezone()

    args.check_epochs = max(1, args.check_epochs)
    checks = check_systems(names, chosen, data, args)
    failed = {name: c for name, c in checks.items() if c.get("error") or c.get("problems")}
    if failed:
        raise SystemExit(f"detection: the check failed for {', '.join(failed)} (see above); nothing was timed")
    results = measure(names, chosen, data, args)

    import slipstream as ss

    report = {
        "benchmark": "detection",
        "results": results,
        "check": checks,
        "skipped": skipped,
        "data": {**{k: str(v) if isinstance(v, Path) else v for k, v in data.items()}, "seed": args.seed,
                 "categories": CATEGORIES, "boxes_per_image": [1, MAX_BOXES_PER_IMAGE],
                 "box_side_fraction": list(BOX_SIDE), "box_aspect": list(BOX_ASPECT)},
        "pipeline": (f"RandomIoUCrop (options 0/0.1/0.3/0.5/0.7/0.9/no crop, scale [0.3, 1], aspect [0.5, 2], "
                     f"40 trials) + horizontal flip p=0.5 + bilinear resize {args.size}x{args.size} + ImageNet "
                     f"normalize to float16 CHW; boxes (B, {data['max_boxes']}, 4) float32 XYXY output pixels, "
                     f"labels (B, {data['max_boxes']}) int64, counts (B,) int64"),
        "size": args.size, "batch_size": args.batch_size, "threads": args.threads, "repeats": args.repeats,
        "epochs": args.epochs, "warmup_epochs": 1, "check_epochs": args.check_epochs,
        "order": "rounds of one run per system, the order rotating by one each round",
        "semantic_differences": SEMANTIC_DIFFERENCES,
        "note": DRIFT_NOTE,
        "machine": machine(), "slipstream": ss.__version__, "slipstream_module": ss.__file__,
        "commit": commit(),
        "command": shlex.join([sys.executable, *sys.argv]),
        "timestamp": started.isoformat(timespec="seconds"),
    }
    out = REPO / "benchmarks" / "results" / f"detection-{started.date().isoformat()}.json"
    write_json(out, report)
    print(table(report))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
