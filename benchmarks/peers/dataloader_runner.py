"""PyTorch DataLoader + Pillow peer runner (system ``dataloader``), implementing
``benchmarks/peers/RUNNERS.md``.

Run with its own interpreter (``bash benchmarks/peers/install-dataloader.sh``
creates it), over a folder of JPEGs (flat, class = file-name prefix before the
first underscore, or ``root/<class>/<image>``)::

    benchmarks/.venvs/dataloader/bin/python benchmarks/peers/dataloader_runner.py --spec SPEC.json

What a plain torchvision-style ImageFolder pipeline does, written out with
Pillow and numpy only (no torchvision in this venv):

* every sample decodes with ``Image.open(path).convert('RGB')``;
* ``train``: torchvision's RandomResizedCrop sampling (10 tries, area scale
  (0.08, 1), log-uniform aspect ratio (3/4, 4/3), then the central fallback),
  crop + resize to 224 in one ``Image.resize((224, 224), BILINEAR, box=...)``,
  horizontal flip with p=0.5, normalise (ImageNet mean/std) into float16 CHW
  (numpy, then ``torch.from_numpy``);
* ``val``: shorter side to 256 (BILINEAR), centre crop 224, normalise;
* ``raw``: the file's bytes in a uint8 row padded with zeros to the largest
  file of the folder (so the default collate can stack variable-size bytes);
* ``simclr``: two train views; ``multicrop``: 2 x 224 (scale (0.4, 1)) +
  6 x 96 (scale (0.05, 0.4)) views, each flipped and normalised; both decode
  each image once and crop it several times.

DataLoader: ``num_workers=threads``, ``pin_memory=True``,
``persistent_workers=True``, ``prefetch_factor`` default, ``shuffle=True``,
``drop_last=False``, ``worker_init_fn`` = ``torch.set_num_threads(1)``.  The
timed loop only counts images (the length of the label batch).

CPU time: ``getrusage`` SELF + CHILDREN only sees worker processes once they
have exited and been reaped, and persistent workers are alive for the whole
timed loop, so their utime + stime are read from ``/proc`` as well.
"""

import time

_T0 = time.monotonic()  # first statement: as RUNNERS.md asks

import io
import math
import os
import random
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from peer_common import bytes_tag, emit, find_samples, live_children_hwm_mb, peak_rss_mb, read_spec, timed_epochs  # noqa: E402  (benchmarks/peers, next to this file)

SYSTEM = "dataloader"
SCENARIOS = ("raw", "train", "val", "simclr", "multicrop")
MEAN255 = (np.array([0.485, 0.456, 0.406]) * 255).astype(np.float32)
INV_STD255 = (1.0 / (np.array([0.229, 0.224, 0.225]) * 255)).astype(np.float32)
RATIO = (3 / 4, 4 / 3)
BILINEAR = Image.Resampling.BILINEAR



# ---------------------------------------------------------------- dataset



def random_resized_crop_box(width: int, height: int, scale: tuple[float, float]) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) drawn like torchvision's RandomResizedCrop.get_params."""
    area = width * height
    lo, hi = math.log(RATIO[0]), math.log(RATIO[1])
    for _ in range(10):
        target = area * random.uniform(scale[0], scale[1])
        aspect = math.exp(random.uniform(lo, hi))
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            top = random.randint(0, height - h)
            left = random.randint(0, width - w)
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


def normalize(img: Image.Image) -> torch.Tensor:
    """uint8 RGB image -> normalised float16 CHW tensor."""
    x = np.asarray(img, dtype=np.float32)
    x -= MEAN255
    x *= INV_STD255
    return torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1), dtype=np.float16))


def train_view(img: Image.Image, size: int, scale: tuple[float, float]) -> torch.Tensor:
    box = random_resized_crop_box(img.width, img.height, scale)
    out = img.resize((size, size), BILINEAR, box=box)
    if random.random() < 0.5:
        out = out.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    return normalize(out)


def val_view(img: Image.Image) -> torch.Tensor:
    w, h = img.size
    if w <= h:
        size = (256, int(256 * h / w))
    else:
        size = (int(256 * w / h), 256)
    img = img.resize(size, BILINEAR)
    top = round((size[1] - 224) / 2.0)
    left = round((size[0] - 224) / 2.0)
    return normalize(img.crop((left, top, left + 224, top + 224)))


VIEWS = {
    "train": [(224, (0.08, 1.0))],
    "simclr": [(224, (0.08, 1.0))] * 2,
    "multicrop": [(224, (0.4, 1.0))] * 2 + [(96, (0.05, 0.4))] * 6,
}


class FolderDataset(Dataset):
    def __init__(self, samples: list[tuple[str, int]], scenario: str):
        self.samples = samples
        self.scenario = scenario
        self.max_bytes = max(os.path.getsize(p) for p, _ in samples) if scenario == "raw" else 0

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int):
        path, label = self.samples[i]
        if self.scenario == "raw":
            row = np.zeros(self.max_bytes, dtype=np.uint8)
            with open(path, "rb") as fh:
                n = fh.readinto(memoryview(row))
            assert n is not None and n > 0
            return torch.from_numpy(row), label
        with Image.open(path) as im:
            img = im.convert("RGB")
        if self.scenario == "val":
            return val_view(img), label
        return (*(train_view(img, size, scale) for size, scale in VIEWS[self.scenario]), label)


def sample_from_bytes(data, label: int, scenario: str, raw_bytes: int, check: bool) -> tuple:
    """One sample of ``scenario`` made this runner's way from an image's
    encoded bytes, for the peers that store the bytes in their own format
    (LitData, MosaicML streaming): the views (or, for ``raw``, the bytes in
    a zero-padded uint8 row of ``raw_bytes``), the label, and with ``check``
    the :func:`peer_common.bytes_tag` of the bytes (else 0)."""
    tag = bytes_tag(data) if check else 0
    if scenario == "raw":
        row = np.zeros(raw_bytes, dtype=np.uint8)
        row[: len(data)] = np.frombuffer(data, dtype=np.uint8)
        return torch.from_numpy(row), label, tag
    with Image.open(io.BytesIO(data)) as im:
        img = im.convert("RGB")
    if scenario == "val":
        return val_view(img), label, tag
    return (*(train_view(img, size, scale) for size, scale in VIEWS[scenario]), label, tag)


def unpack_views(batch) -> tuple:
    """A collated batch of :func:`sample_from_bytes` samples as
    ``(outputs, labels, tags)``, the form ``peer_common.run_classification`` takes."""
    return list(batch[:-2]), batch[-2], batch[-1]


def bytes_sample_settings(spec: dict, raw_bytes: int) -> dict:
    """The settings :func:`sample_from_bytes` runs with, for a runner's report."""
    scenario = spec["scenario"]
    return {
        "worker_torch_threads": 1,
        "decoder": "PIL Image.open(BytesIO(bytes)).convert('RGB') (the DataLoader peer's decode, from the stored bytes)",
        "resize": "Pillow BILINEAR (Image.resize with box for crops)",
        "output": "uint8 rows padded to the largest file" if scenario == "raw"
        else "float16 NCHW (contiguous), label int64",
        "jpeg_decodes_per_image": 0 if scenario == "raw" else 1,
        "raw_row_bytes": raw_bytes or None,
        "first_batch_clock": "start_monotonic" if spec.get("start_monotonic") is not None else "runner first line",
        "cpu_accounting": "getrusage SELF+CHILDREN + utime/stime of live worker processes from /proc",
    }


def worker_init(_worker_id: int) -> None:
    torch.set_num_threads(1)


def shutdown_workers(loader: DataLoader) -> None:
    it = getattr(loader, "_iterator", None)
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()
    loader._iterator = None


# ---------------------------------------------------------------- main


def main(argv: list[str]) -> int:
    spec = read_spec(argv, "PyTorch DataLoader + Pillow peer runner (see RUNNERS.md)", _T0)

    scenario = spec["scenario"]
    version = f"torch {torch.__version__}, pillow {metadata.version('pillow')}, numpy {np.__version__}"
    base = {"system": SYSTEM, "version": version, "scenario": scenario}
    if scenario not in SCENARIOS:
        emit({**base, "unsupported": f"unknown scenario {scenario!r}"})
        return 0

    batch_size, threads, epochs = spec["batch_size"], spec["threads"], spec["epochs"]
    warmup, first_batch_only, start = spec["warmup_epochs"], spec["first_batch_only"], spec["start"]

    dataset = FolderDataset(find_samples(Path(spec["data"])), scenario)
    accel = getattr(torch, "accelerator", None)
    pin_effective = bool(accel.is_available()) if accel is not None else torch.cuda.is_available()
    settings = {
        "data": spec["data"],
        "order": "shuffle=True (RandomSampler)",
        "num_workers": threads,
        "batch_size": batch_size,
        "drop_last": False,
        "pin_memory": True,
        "pin_memory_effective": pin_effective,
        "persistent_workers": threads > 0,
        "prefetch_factor": 2,
        "worker_torch_threads": 1,
        "multiprocessing_start_method": torch.multiprocessing.get_start_method(),
        "decoder": "PIL Image.open(path).convert('RGB')",
        "resize": "Pillow BILINEAR (Image.resize with box for crops)",
        "output": "uint8 rows padded to the largest file"
        if scenario == "raw"
        else "float16 NCHW (contiguous), label int64",
        "views": [f"{size}x{size} scale={scale}" for size, scale in VIEWS.get(scenario, [])]
        or (["resize 256 + center crop 224"] if scenario == "val" else []),
        "jpeg_decodes_per_image": 0 if scenario == "raw" else 1,
        "raw_row_bytes": dataset.max_bytes or None,
        "first_batch_clock": "start_monotonic" if spec.get("start_monotonic") is not None else "runner first line",
        "cpu_accounting": "getrusage SELF+CHILDREN + utime/stime of live worker processes from /proc",
        "peak_rss": "ru_maxrss SELF + ru_maxrss CHILDREN (largest worker, read after the workers exit)",
    }

    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        num_workers=threads,
        pin_memory=True,
        drop_last=False,
        persistent_workers=threads > 0,
        worker_init_fn=worker_init if threads > 0 else None,
    )

    if first_batch_only:
        batch = next(iter(loader))
        first = time.monotonic() - start
        n = len(batch[-1])
        shutdown_workers(loader)
        emit({**base, "first_batch_s": first, "images": n, "peak_rss_mb": peak_rss_mb(), "settings": settings})
        return 0

    measured = timed_epochs(loader, lambda batch: len(batch[-1]), warmup, epochs)
    settings["workers_peak_rss_sum_mb"] = live_children_hwm_mb()
    shutdown_workers(loader)
    emit(
        {
            **base,
            **measured,
            "peak_rss_mb": peak_rss_mb(),
            "settings": settings,
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
