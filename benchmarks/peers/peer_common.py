"""What every peer's runner (and FFCV's writer) shares: the folder's
samples and labels, the detection benchmark's COCO annotations and its
``--check`` summary, and the CPU-time and memory accounting that RUNNERS.md
asks for.  Standard library only: it is imported from each peer's own
environment."""

import json
import math
import os
import random
import resource
import sys
import time
from pathlib import Path

JPEG_SUFFIXES = {".jpg", ".jpeg"}
RATIO = (3 / 4, 4 / 3)
"""RandomResizedCrop's aspect ratios, torchvision's default."""


def random_resized_crop_box(width: int, height: int, scale: tuple[float, float],
                            rng: random.Random | None = None) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) drawn like torchvision's RandomResizedCrop.get_params,
    with ``rng`` (default: the ``random`` module's own generator)."""
    rng = rng if rng is not None else random  # the module's functions are its generator's methods
    area = width * height
    lo, hi = math.log(RATIO[0]), math.log(RATIO[1])
    for _ in range(10):
        target = area * rng.uniform(scale[0], scale[1])
        aspect = math.exp(rng.uniform(lo, hi))
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            top = rng.randint(0, height - h)
            left = rng.randint(0, width - w)
            return left, top, left + w, top + h
    # Central crop at the nearest allowed aspect ratio.
    actual = width / height
    if actual < RATIO[0]:
        w, h = width, round(width / RATIO[0])
    elif actual > RATIO[1]:
        w, h = round(height * RATIO[1]), height
    else:
        w, h = width, height
    top, left = (height - h) // 2, (width - w) // 2
    return left, top, left + w, top + h


def find_samples(folder: Path) -> list[tuple[Path, int]]:
    """Sorted (path, label) pairs for a flat folder (label: the sorted file-name
    prefixes before the first underscore, e.g. ImageNet's wnids) or a
    ``root/<class>/<image>`` tree."""
    paths = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and p.suffix.lower() in JPEG_SUFFIXES and len(p.relative_to(folder).parts) <= 2
    )
    if not paths:
        raise SystemExit(f"{Path(sys.argv[0]).stem}: no JPEG files in {folder}")

    def class_of(p: Path) -> str:
        rel = p.relative_to(folder)
        return rel.parts[0] if len(rel.parts) == 2 else p.name.split("_", 1)[0]

    classes = sorted({class_of(p) for p in paths})
    index = {c: i for i, c in enumerate(classes)}
    return [(p, index[class_of(p)]) for p in paths]


SIDECAR = "slipstream-bench.json"


def write_sidecar(folder: Path, samples: list[tuple[str, int]]) -> None:
    """Record, beside a peer's converted dataset, what its runner needs
    without scanning the samples: their number and the largest file's size
    in bytes (the ``raw`` scenario pads each image's bytes to it)."""
    sizes = [os.path.getsize(p) for p, _ in samples]
    with open(Path(folder) / SIDECAR, "w") as fh:
        json.dump({"images": len(sizes), "max_bytes": max(sizes)}, fh)


def publish_dataset(partial: Path, out: Path, samples: list[tuple[str, int]]) -> None:
    """Put a peer's dataset, written completely into ``partial``, in place
    at ``out`` with its :func:`write_sidecar` record: a writer that fails
    half-way leaves only ``partial`` behind, never a short ``out``."""
    import shutil

    write_sidecar(partial, samples)
    shutil.rmtree(out, ignore_errors=True)
    Path(partial).rename(out)


def read_sidecar(folder: str | os.PathLike) -> dict:
    """What :func:`write_sidecar` recorded for ``folder``."""
    with open(Path(folder) / SIDECAR) as fh:
        return json.load(fh)


def _child_pids() -> list[int]:
    """Live descendants of this process (from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [os.getpid()]
    while todo:
        kids = parents.get(todo.pop(), [])
        out.extend(kids)
        todo.extend(kids)
    return out


def _live_children_cpu() -> float:
    """utime + stime (+ their reaped children's) of live descendants, in seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in _child_pids():
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
    return total / tick


def live_children_hwm_mb() -> float:
    """Sum of the live descendants' peak RSS (VmHWM), in MB (shared pages counted per process)."""
    total_kb = 0
    for pid in _child_pids():
        try:
            with open(f"/proc/{pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        total_kb += int(line.split()[1])
                        break
        except OSError:
            continue
    return total_kb / 1024.0


def cpu_seconds() -> float:
    """Process CPU time: getrusage SELF + CHILDREN, plus live child processes."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime + _live_children_cpu()


def peak_rss_mb() -> float:
    """ru_maxrss of the process plus that of its largest reaped child, in MB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return (own + kids) / 1024.0


def emit(result: dict) -> None:
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def result_base(spec: dict, system: str, version: str, scenarios) -> dict | None:
    """The keys every result of this run starts with (``system``,
    ``version``, ``scenario``); None, after printing the ``unsupported``
    result, when the runner has no such scenario (``scenarios``)."""
    base = {"system": system, "version": version, "scenario": spec["scenario"]}
    if spec["scenario"] not in scenarios:
        emit({**base, "unsupported": f"unknown scenario {spec['scenario']!r}"})
        return None
    return base


def read_spec(argv: list[str], description: str, started: float) -> dict:
    """The SPEC.json named by ``--spec``, with every key RUNNERS.md defines
    filled in: defaults, and ``start`` (the orchestrator's clock, else this
    runner's first line, ``started``)."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--spec", required=True, help="SPEC.json")
    with open(parser.parse_args(argv).spec) as fh:
        spec = json.load(fh)
    spec["batch_size"] = int(spec.get("batch_size", 128))
    spec["threads"] = int(spec.get("threads") or os.cpu_count() or 1)
    spec["epochs"] = int(spec.get("epochs", 1))
    spec["warmup_epochs"] = int(spec.get("warmup_epochs", 0))
    spec["first_batch_only"] = bool(spec.get("first_batch_only", False))
    spec["check"] = bool(spec.get("check", False))
    spec["check_epochs"] = int(spec.get("check_epochs", 2))
    spec["start"] = started if spec.get("start_monotonic") is None else float(spec["start_monotonic"])
    return spec


def timed_epochs(loader, images_in, warmup: int, epochs: int) -> dict:
    """``warmup`` untimed epochs, then ``epochs`` timed ones that only count
    the images of each batch (``images_in(batch)``), as a training step
    receiving them would; RUNNERS.md's throughput and CPU-time keys."""
    rates, counts, cpu_start = [], [], None
    for epoch in range(warmup + epochs):
        if epoch == warmup:
            cpu_start = cpu_seconds()
        started, n = time.perf_counter(), 0
        for batch in loader:
            n += images_in(batch)
        took = time.perf_counter() - started
        if epoch >= warmup:
            rates.append(n / took)
            counts.append(n)
    cpu = cpu_seconds() - cpu_start if cpu_start is not None else 0.0
    return {"epoch_images_per_s": rates, "images": counts[0] if counts else 0,
            "cpu_seconds_per_image": cpu / sum(counts) if counts and sum(counts) else None}


# ---------------------------------------------------------------- classification check (RUNNERS.md, "Check")


def bytes_tag(data: bytes) -> int:
    """A signed 64-bit tag of one image's encoded bytes (BLAKE2b, 8 bytes),
    small enough to travel through a batch as an int64 tensor: two systems
    that tag the same files read the same bytes."""
    import hashlib

    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little", signed=True)


def bytes_digest(tags) -> str:
    """The order-free digest of a set of :func:`bytes_tag` values: the hex
    SHA-256 of their sorted list.  Equal between two systems exactly when
    they decoded the same multiset of files."""
    import hashlib

    return hashlib.sha256(",".join(str(t) for t in sorted(tags)).encode()).hexdigest()


def folder_digest(folder: Path) -> dict:
    """What a correct ``check`` over ``folder`` reports: its number of
    images and the :func:`bytes_digest` of its files' bytes."""
    samples = find_samples(folder)
    return {"images": len(samples), "bytes_digest": bytes_digest(bytes_tag(p.read_bytes()) for p, _ in samples)}


def classification_check(loader, unpack, epochs: int) -> dict:
    """The ``check`` entry of a classification runner's result (RUNNERS.md,
    "Check"): ``epochs`` epochs of ``loader``, whose batches ``unpack(batch)``
    turns into ``(outputs, labels, tags)``: the list of output tensors (one
    per view, or the raw rows), the label batch and the :func:`bytes_tag`
    of the bytes each sample was decoded from.  It reports the images of
    each epoch, the first batch's shapes and dtypes, and over each epoch the
    digest of the tags, which equals :func:`folder_digest`'s when every
    image of the folder was read once, from its original bytes."""
    first: dict = {}
    counts, digests, distinct = [], [], []
    for _ in range(epochs):
        tags: list[int] = []
        for batch in loader:
            outputs, labels, batch_tags = unpack(batch)
            if not first:
                first = {"output_shapes": [list(o.shape) for o in outputs],
                         "output_dtypes": [str(o.dtype) for o in outputs],
                         "labels_dtype": str(labels.dtype)}
            tags.extend(int(t) for t in batch_tags)
        counts.append(len(tags))
        distinct.append(len(set(tags)))
        digests.append(bytes_digest(tags))
    return {**first, "epochs": epochs, "epoch_images": counts, "epoch_distinct_images": distinct,
            "epoch_bytes_digests": digests}


def run_classification(spec: dict, base: dict, settings: dict, loader, unpack, close=None) -> None:
    """Measure ``loader`` as ``spec`` asks and print the result: with
    ``check`` the :func:`classification_check`, with ``first_batch_only``
    the time to the first batch, else the timed epochs (RUNNERS.md).
    ``unpack(batch)`` gives ``(outputs, labels, tags)``; images are counted
    as the length of ``labels``.  ``close()`` stops the loader's workers
    before the last memory reading."""
    close = close or (lambda: None)
    if spec["check"]:
        check = classification_check(loader, unpack, spec["check_epochs"])
        close()
        emit({**base, "check": check, "settings": settings})
        return
    if spec["first_batch_only"]:
        batches = iter(loader)
        batch = next(batches)
        first = time.monotonic() - spec["start"]
        if hasattr(batches, "close"):  # a generator: end its epoch (and its threads) now
            batches.close()
        close()
        emit({**base, "first_batch_s": first, "images": len(unpack(batch)[1]), "peak_rss_mb": peak_rss_mb(),
              "settings": settings})
        return
    measured = timed_epochs(loader, lambda batch: len(unpack(batch)[1]), spec["warmup_epochs"], spec["epochs"])
    workers = live_children_hwm_mb()
    if workers:
        settings["workers_peak_rss_sum_mb"] = workers
    close()
    emit({**base, **measured, "peak_rss_mb": peak_rss_mb(), "settings": settings})


# ---------------------------------------------------------------- detection (RUNNERS.md, "Detection")


def read_coco(annotations: str | os.PathLike) -> list[tuple[str, list[list[float]], list[int]]]:
    """``(file_name, boxes, labels)`` per image of a COCO instances file, in
    the order of its ``images`` list: ``boxes`` XYXY in absolute pixels
    (COCO's ``[x, y, w, h]`` plus the corner), ``labels`` the category ids.
    Every system reads its annotations from here or from the file itself,
    so that all of them see the same boxes."""
    with open(annotations) as fh:
        coco = json.load(fh)
    per_image: dict[int, tuple[list[list[float]], list[int]]] = {image["id"]: ([], []) for image in coco["images"]}
    for ann in coco["annotations"]:
        x, y, w, h = ann["bbox"]
        boxes, labels = per_image[ann["image_id"]]
        boxes.append([x, y, x + w, y + h])
        labels.append(int(ann["category_id"]))
    return [(image["file_name"], *per_image[image["id"]]) for image in coco["images"]]


def detection_check(loader, unpack, size: int, epochs: int) -> dict:
    """The ``check`` entry of a detection runner's result (RUNNERS.md,
    "Detection"): ``epochs`` epochs of ``loader``, whose batches
    ``unpack(batch)`` turns into ``(image, boxes, labels, counts)`` tensors.
    It holds the first batch's padded boxes, labels and counts as nested
    lists, the image batch's shape and dtype and the other outputs' shapes
    and dtypes, and over all epochs the fewest and most boxes kept in an
    image, how many kept boxes are not a box within [0, size] (``x0 < x1``,
    ``y0 < y1``, a tolerance of size / 1000), and the mean number of boxes
    kept per image and the mean area of a kept box as a fraction of the
    ``size`` x ``size`` output, which differ between systems only if their
    crop semantics do."""
    first: dict = {}
    kept, areas, outside = [], [], 0
    low, high = -1e-3 * size, size * (1 + 1e-3)
    for _ in range(epochs):
        for batch in loader:
            image, boxes, labels, counts = unpack(batch)
            box_rows, count_list = boxes.tolist(), counts.tolist()
            if not first:
                first = {
                    "image_shape": list(image.shape),
                    "image_dtype": str(image.dtype),
                    "boxes_shape": list(boxes.shape),
                    "boxes_dtype": str(boxes.dtype),
                    "labels_shape": list(labels.shape),
                    "labels_dtype": str(labels.dtype),
                    "counts_shape": list(counts.shape),
                    "counts_dtype": str(counts.dtype),
                    "boxes": box_rows,
                    "labels": labels.tolist(),
                    "counts": count_list,
                }
            kept.extend(count_list)
            for rows, n in zip(box_rows, count_list):
                for x0, y0, x1, y1 in rows[:n]:
                    areas.append((x1 - x0) * (y1 - y0) / (size * size))
                    outside += not (low <= x0 < x1 <= high and low <= y0 < y1 <= high)
    return {
        **first,
        "epochs": epochs,
        "epoch_images": len(kept),
        "min_count": min(kept, default=None),
        "max_count": max(kept, default=None),
        "boxes_outside": outside,
        "mean_boxes_kept": sum(kept) / len(kept) if kept else None,
        "mean_box_area_fraction": sum(areas) / len(areas) if areas else None,
    }


def detection_spec(spec: dict) -> dict:
    """``spec`` (from :func:`read_spec`) with the detection keys RUNNERS.md
    defines filled in: ``size`` (300), ``max_boxes`` (required),
    ``check`` (false) and ``check_epochs`` (2)."""
    if "max_boxes" not in spec:
        raise SystemExit(f"{Path(sys.argv[0]).stem}: the spec has no max_boxes")
    spec["size"] = int(spec.get("size", 300))
    spec["max_boxes"] = int(spec["max_boxes"])
    spec["check"] = bool(spec.get("check", False))
    spec["check_epochs"] = int(spec.get("check_epochs", 2))
    return spec
