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
  each image once and crop it several times;
* ``recipe``: torchvision's reference training recipe, the way its PIL path
  runs it: the train view at 176, then TrivialAugmentWide (bilinear, black
  fill) with Pillow (``pillow_augment``), normalised into float32,
  RandomErasing(0.1) on the tensor, and each batch mixed by MixUp(0.2) or
  CutMix(1.0) in the ``collate_fn`` (``recipe_torch``), as the reference
  script mixes in its own ``collate_fn``: float32 images, soft labels.

With ``draft: true`` in SPEC.json (system ``"dataloader (draft)"``) the
images are decoded the way a user tuning this pipeline would, with Pillow's
reduced-size JPEG decoding ``Image.draft('RGB', size)`` (libjpeg's DCT
scaling by 1/2, 1/4 or 1/8: a smaller image for less work), keeping what the
output shows:

* ``train`` / ``simclr`` / ``multicrop``: ``Image.open`` reads the size
  from the header; every view's crop box is drawn on that full size first;
  the reduction 1/a is the strongest of 1/8, 1/4, 1/2, 1 that leaves every
  crop at least its output size on both sides; ``draft('RGB', (W // a,
  H // a))`` asks for it (draft picks the strongest reduction whose image is
  still at least the requested size, which for that request is 1/a); after
  ``convert('RGB')`` each box is mapped into the reduced image by the box
  ``draft`` returns (where the original image lies in the reduced one), in
  floats, so each view is the same region of the photo, resized, flipped
  and normalised as without draft;
* ``val``: the strongest reduction that keeps the shorter side at least
  256, then the same resize (output size computed from the full size, the
  whole image given as ``box``) and centre crop;
* ``raw``: no decoding, so no draft.

With ``check`` (RUNNERS.md, "Check") each sample also carries
:func:`peer_common.bytes_tag` of its file's bytes, read separately from the
path so that the timed path stays ``Image.open(path)``.

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
import os
import random
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from peer_common import (  # noqa: E402  (benchmarks/peers, next to this file)
    bytes_tag, find_samples, random_resized_crop_box, read_spec, result_base, run_classification)
from pillow_augment import trivial_augment_wide  # noqa: E402
from recipe_torch import mix_batch, random_erasing  # noqa: E402
from torch.utils.data import default_collate  # noqa: E402

SYSTEM = "dataloader"
SCENARIOS = ("raw", "train", "val", "simclr", "multicrop", "recipe")
MEAN255 = (np.array([0.485, 0.456, 0.406]) * 255).astype(np.float32)
INV_STD255 = (1.0 / (np.array([0.229, 0.224, 0.225]) * 255)).astype(np.float32)
BILINEAR = Image.Resampling.BILINEAR
DRAFT_REDUCTIONS = (8, 4, 2, 1)  # the DCT scalings Image.draft chooses from, strongest first



# ---------------------------------------------------------------- dataset



def normalize(img: Image.Image, dtype: type = np.float16) -> torch.Tensor:
    """uint8 RGB image -> normalised CHW tensor of ``dtype``."""
    x = np.asarray(img, dtype=np.float32)
    x -= MEAN255
    x *= INV_STD255
    return torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1), dtype=dtype))


def finish(view: Image.Image, scenario: str) -> torch.Tensor:
    """A cropped and flipped view's tail: normalised into float16, or for
    ``recipe`` TrivialAugmentWide, normalised into float32 and RandomErasing(0.1)."""
    if scenario == "recipe":
        return random_erasing(normalize(trivial_augment_wide(view), np.float32), 0.1)
    return normalize(view)


def train_view(img: Image.Image, size: int, scale: tuple[float, float], scenario: str = "train") -> torch.Tensor:
    box = random_resized_crop_box(img.width, img.height, scale)
    out = img.resize((size, size), BILINEAR, box=box)
    if random.random() < 0.5:
        out = out.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    return finish(out, scenario)


def val_view(img: Image.Image, full_size: tuple[int, int] | None = None,
             box: tuple[float, float, float, float] | None = None) -> torch.Tensor:
    """Shorter side to 256, centre crop 224.  For a reduced (drafted) image,
    ``full_size`` is the photo's own size, which sets the output size, and
    ``box`` where the photo lies in ``img``."""
    w, h = full_size or img.size
    if w <= h:
        size = (256, int(256 * h / w))
    else:
        size = (int(256 * w / h), 256)
    img = img.resize(size, BILINEAR, box=box)
    top = round((size[1] - 224) / 2.0)
    left = round((size[0] - 224) / 2.0)
    return normalize(img.crop((left, top, left + 224, top + 224)))


VIEWS = {
    "train": [(224, (0.08, 1.0))],
    "simclr": [(224, (0.08, 1.0))] * 2,
    "multicrop": [(224, (0.4, 1.0))] * 2 + [(96, (0.05, 0.4))] * 6,
    "recipe": [(176, (0.08, 1.0))],
}


def draft_reduction(ratio: float) -> int:
    """The ``a`` of the strongest JPEG reduction 1/a (a in 8, 4, 2, 1) with
    ``ratio >= a``, where ``ratio`` is the shortest side that must survive
    the reduction over the length it must keep (a crop side over its output
    size): after 1/a that side is still at least that length."""
    return next(a for a in DRAFT_REDUCTIONS if ratio >= a or a == 1)


def draft(im: Image.Image, reduction: int) -> tuple[float, float]:
    """Have ``im`` (opened, not loaded) decode at 1/``reduction`` with
    ``Image.draft('RGB', (W // reduction, H // reduction))``, the request
    for which draft picks exactly that reduction, and return the factors
    that map full-size coordinates into the image it will decode (from the
    box draft returns; (1, 1) when nothing is reduced, e.g. not a JPEG)."""
    if reduction == 1:
        return 1.0, 1.0
    width, height = im.size
    drafted = im.draft("RGB", (width // reduction, height // reduction))
    if drafted is None:
        return 1.0, 1.0
    _, box = drafted
    return box[2] / width, box[3] / height


def drafted_views(im: Image.Image, scenario: str) -> list[torch.Tensor]:
    """The views of ``scenario`` from ``im`` decoded at the strongest
    reduction that keeps them what a full decode gives (module docstring,
    ``draft``)."""
    width, height = im.size
    if scenario == "val":
        sx, sy = draft(im, draft_reduction(min(width, height) / 256))
        return [val_view(im.convert("RGB"), (width, height), (0.0, 0.0, width * sx, height * sy))]
    views = VIEWS[scenario]
    boxes = [random_resized_crop_box(width, height, scale) for _, scale in views]
    ratio = min(min(right - left, bottom - top) / size for (size, _), (left, top, right, bottom) in zip(views, boxes))
    sx, sy = draft(im, draft_reduction(ratio))
    img = im.convert("RGB")
    out = []
    for (size, _), (left, top, right, bottom) in zip(views, boxes):
        view = img.resize((size, size), BILINEAR, box=(left * sx, top * sy, right * sx, bottom * sy))
        if random.random() < 0.5:
            view = view.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        out.append(finish(view, scenario))
    return out


def image_views(im: Image.Image, scenario: str, use_draft: bool = False) -> list[torch.Tensor]:
    """The views of ``scenario`` (not ``raw``) from an opened image: a full
    ``convert('RGB')`` decode, or with ``use_draft`` :func:`drafted_views`."""
    if use_draft:
        return drafted_views(im, scenario)
    img = im.convert("RGB")
    if scenario == "val":
        return [val_view(img)]
    return [train_view(img, size, scale, scenario) for size, scale in VIEWS[scenario]]


class FolderDataset(Dataset):
    """The folder's samples as ``(*views, label, tag)`` (``raw``: the padded
    bytes row as the one view); ``tag`` is the file's
    :func:`peer_common.bytes_tag` with ``check``, else 0."""

    def __init__(self, samples: list[tuple[str, int]], scenario: str, use_draft: bool = False, check: bool = False):
        self.samples = samples
        self.scenario = scenario
        self.use_draft, self.check = use_draft, check
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
            tag = bytes_tag(row[:n].tobytes()) if self.check else 0
            return torch.from_numpy(row), label, tag
        with Image.open(path) as im:
            views = image_views(im, self.scenario, self.use_draft)
        tag = bytes_tag(Path(path).read_bytes()) if self.check else 0
        return (*views, label, tag)


def sample_from_bytes(data, label: int, scenario: str, raw_bytes: int, check: bool, use_draft: bool = False) -> tuple:
    """One sample of ``scenario`` made this runner's way from an image's
    encoded bytes, for the peers that store the bytes in their own format
    (LitData, MosaicML streaming): the views (or, for ``raw``, the bytes in
    a zero-padded uint8 row of ``raw_bytes``), the label, and with ``check``
    the :func:`peer_common.bytes_tag` of the bytes (else 0).  ``use_draft``
    decodes as the ``draft`` spec key does (module docstring)."""
    tag = bytes_tag(data) if check else 0
    if scenario == "raw":
        row = np.zeros(raw_bytes, dtype=np.uint8)
        row[: len(data)] = np.frombuffer(data, dtype=np.uint8)
        return torch.from_numpy(row), label, tag
    with Image.open(io.BytesIO(data)) as im:
        views = image_views(im, scenario, use_draft)
    return (*views, label, tag)


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


class MixingCollate:
    """The recipe's ``collate_fn``: the default collation, then the batch
    mixed by MixUp or CutMix (``recipe_torch.mix_batch``) into soft labels."""

    def __init__(self, num_classes: int):
        self.num_classes = num_classes

    def __call__(self, samples):
        image, label, tag = default_collate(samples)
        return (*mix_batch(image, label, self.num_classes), tag)


def recipe_num_classes(spec: dict, samples: list[tuple[object, int]]) -> int:
    """The soft labels' length: the spec's ``num_classes``, else the folder's classes."""
    return int(spec.get("num_classes") or max(label for _, label in samples) + 1)


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
    use_draft = bool(spec.get("draft", False))
    version = f"torch {torch.__version__}, pillow {metadata.version('pillow')}, numpy {np.__version__}"
    base = result_base(spec, f"{SYSTEM} (draft)" if use_draft else SYSTEM, version, SCENARIOS)
    if base is None:
        return 0

    batch_size, threads = spec["batch_size"], spec["threads"]
    samples = find_samples(Path(spec["data"]))
    dataset = FolderDataset(samples, scenario, use_draft, spec["check"])
    accel = getattr(torch, "accelerator", None)
    pin_effective = bool(accel.is_available()) if accel is not None else torch.cuda.is_available()
    if use_draft and scenario != "raw":
        decoder = ("PIL Image.open(path) + draft('RGB', (W // a, H // a)) + convert('RGB'): libjpeg DCT scaling "
                   "by 1/a, a in (8, 4, 2, 1)")
        draft_rule = ("crop boxes drawn on the full size first; a = largest with every view's crop >= its output "
                      "size on both sides after 1/a; boxes mapped by draft's returned box, in floats"
                      if scenario != "val" else "a = largest with the shorter side >= 256 after 1/a; "
                      "resize 256 sized from the full image, box = the whole image in the reduced one")
    else:
        decoder, draft_rule = "PIL Image.open(path).convert('RGB')", None
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
        "decoder": decoder,
        "draft": use_draft,
        "draft_rule": draft_rule,
        "resize": "Pillow BILINEAR (Image.resize with box for crops)",
        "output": "uint8 rows padded to the largest file"
        if scenario == "raw"
        else ("float32 NCHW, soft labels float32 (N, classes)" if scenario == "recipe"
              else "float16 NCHW (contiguous), label int64"),
        "recipe": "after the crop and flip: TrivialAugmentWide with Pillow (pillow_augment, bilinear, black fill), "
                  "Normalize to float32, RandomErasing(0.1); MixUp(0.2) or CutMix(1.0) in the collate_fn "
                  "(recipe_torch)" if scenario == "recipe" else None,
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
        collate_fn=MixingCollate(recipe_num_classes(spec, samples)) if scenario == "recipe" else None,
    )
    run_classification(spec, base, settings, loader, unpack_views, close=lambda: shutdown_workers(loader))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
