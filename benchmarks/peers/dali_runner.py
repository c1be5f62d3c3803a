"""NVIDIA DALI peer runner (system ``dali``), CPU only, implementing
``benchmarks/peers/RUNNERS.md``.

Run with its own interpreter (``bash benchmarks/peers/install-dali.sh``
creates it), over a folder of JPEGs (flat, class = file-name prefix before the
first underscore, or ``root/<class>/<image>``)::

    benchmarks/.venvs/dali/bin/python benchmarks/peers/dali_runner.py --spec SPEC.json

The pipeline runs with ``device_id=None`` (no GPU: every operator on the CPU,
``num_threads=threads``, ``prefetch_queue_depth=2``) and is handed to PyTorch
by the plugin's ``DALIGenericIterator``.

Input: ``fn.external_source`` in batch mode (``batch_info=True``), whose
callback returns the epoch's next slice of a per-epoch permutation of the
folder (``numpy.random.default_rng((0, epoch))``), each file's bytes as a
uint8 array, with its label and, with ``check``, its
:func:`peer_common.bytes_tag`.  The last batch of an epoch is short and the
callback raises ``StopIteration`` after it; the iterator (``size=-1``,
``auto_reset=True``) ends the epoch there, as its documentation describes for
an external source, and the pipeline goes on prefetching the next epoch's
first batches.  So every epoch decodes exactly the ``N`` images it counts.
``fn.readers.file`` cannot do that: a reader always fills whole batches,
either padding the last one (``pad_last_batch=True``: ``ceil(N / batch) *
batch`` decodes per epoch, the extra ones thrown away by the iterator) or
reading on into the next epoch's samples, which ``LastBatchPolicy.PARTIAL``
then drops.

Scenarios, DALI's standard operators only:

* ``train``: the fused region decoder ``fn.decoders.image_random_crop``
  (``device='cpu'``, RGB, area (0.08, 1), aspect (3/4, 4/3), 10 attempts),
  which decodes only the rows and columns of the drawn crop, then
  ``fn.resize(resize_x=224, resize_y=224)`` (linear) and
  ``fn.crop_mirror_normalize`` (float16, CHW, ImageNet mean/std, mirror =
  ``fn.random.coin_flip(0.5)``).  This is the training pipeline of DALI's
  ResNet-50 PyTorch example, whose CPU path (``--dali_cpu``) decodes with
  ``decoders.image_random_crop`` on ``device='cpu'`` and resizes after it
  (https://docs.nvidia.com/deeplearning/dali/user-guide/docs/examples/use_cases/pytorch/resnet50/pytorch-resnet50.html,
  https://github.com/NVIDIA/DALI/blob/main/docs/examples/use_cases/pytorch/resnet50/main.py);
  the area and aspect ranges here are torchvision's, as for every peer;
* ``val``: ``fn.decoders.image``, ``fn.resize(resize_shorter=256)`` (linear),
  ``fn.crop_mirror_normalize(crop=(224, 224))`` (centre): the example's
  validation pipeline;
* ``simclr`` (2 x 224) and ``multicrop`` (2 x 224 area (0.4, 1) + 6 x 96
  area (0.05, 0.4)): each view flipped and normalised like ``train``.  Of
  the two ways to make several views, one fused region decode per view
  (``image_random_crop`` + ``resize``) or one full decode and one
  ``fn.random_resized_crop`` per view, :data:`FUSED_VIEWS` holds the faster
  on the benchmark machine (2 threads, the ImageNet sample): one decode and
  a crop per view for both, since two or eight region decodes of crops
  covering up to the whole image cost more than one full decode (for the
  single view of ``train`` the fused decode is the faster);
* ``raw``: the encoded bytes, ``fn.pad`` ded with zeros to the largest file
  of the folder (a fixed uint8 row, as the DataLoader peer does);
* ``recipe``: torchvision's reference training recipe with DALI's own
  policy: the ``train`` view at 176, ``auto_aug.trivial_augment.trivial_augment_wide``
  (31 bins, 32-pixel translations, linear, black fill: torchvision's wide
  space; https://docs.nvidia.com/deeplearning/dali/user-guide/docs/auto_aug/trivial_augment.html),
  then ``crop_mirror_normalize`` into float32 with the flip (its fused
  mirror, after the policy where torchvision flips before it: the policy's
  geometric operations are drawn with either sign, so the two orders give
  the same distribution of images), and RandomErasing(0.1) as ``fn.erase``
  of one normalized rectangle (area 2-33%, aspect log-uniform in
  (0.3, 3.3)) under a per-sample coin flip (conditional execution, which
  the policy needs anyway).  DALI has no batch mixing operator, so each
  batch the iterator hands over is mixed by MixUp(0.2) or CutMix(1.0) in
  torch (``recipe_torch``) before the training step takes it: float32
  images, soft labels.

The timed loop only counts images (the length of the label batch).  With
``check``, each sample also carries the ``bytes_tag`` of its file's bytes
through the pipeline as an int64 output (RUNNERS.md, "Check").
"""

import time

_T0 = time.monotonic()  # first statement: as RUNNERS.md asks

import os
import sys
from pathlib import Path

import numpy as np

from peer_common import bytes_tag, find_samples, read_spec, result_base, run_classification  # noqa: E402  (benchmarks/peers, next to this file)
from recipe_torch import ERASE_RATIO, ERASE_SCALE, mix_batch  # noqa: E402

SYSTEM = "dali"
SCENARIOS = ("raw", "train", "val", "simclr", "multicrop", "recipe")
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]
RATIO = [3 / 4, 4 / 3]
VIEWS = {
    "train": [(224, (0.08, 1.0))],
    "simclr": [(224, (0.08, 1.0))] * 2,
    "multicrop": [(224, (0.4, 1.0))] * 2 + [(96, (0.05, 0.4))] * 6,
    "recipe": [(176, (0.08, 1.0))],
}
# Per scenario: one fused region decode per view (True) or one full decode
# and a random_resized_crop per view (False); see the module docstring.
FUSED_VIEWS = {"train": True, "simclr": False, "multicrop": False, "recipe": True}
SEED = 0


# ---------------------------------------------------------------- data


class EpochSource:
    """The external source's batch callback: for ``BatchInfo(iteration,
    epoch_idx)`` the ``iteration``-th slice of ``batch_size`` samples of
    epoch ``epoch_idx``'s permutation of ``samples`` (the last one short),
    and ``StopIteration`` past the end.  It returns the files' bytes (uint8
    arrays), the labels (int32, shape (1,)) and the bytes tags (int64, shape
    (1,); zeros unless ``check``).  Stateless in the iteration, so the
    pipeline may call it ahead of the consumer (prefetching) and across the
    end of an epoch."""

    def __init__(self, samples: list[tuple[str, int]], batch_size: int, check: bool, seed: int = SEED):
        self.paths = [p for p, _ in samples]
        self.labels = np.array([label for _, label in samples], dtype=np.int32)
        self.batch_size, self.check, self.seed = batch_size, check, seed
        self._orders: dict[int, np.ndarray] = {}

    def order(self, epoch: int) -> np.ndarray:
        if epoch not in self._orders:
            self._orders = {epoch: np.random.default_rng((self.seed, epoch)).permutation(len(self.paths))}
        return self._orders[epoch]

    def __call__(self, info):
        start = info.iteration * self.batch_size
        if start >= len(self.paths):
            raise StopIteration
        jpegs, labels, tags = [], [], []
        for i in self.order(info.epoch_idx)[start:start + self.batch_size]:
            with open(self.paths[i], "rb") as fh:
                data = fh.read()
            jpegs.append(np.frombuffer(data, dtype=np.uint8))
            labels.append(self.labels[i:i + 1])
            tags.append(np.array([bytes_tag(data) if self.check else 0], dtype=np.int64))
        return jpegs, labels, tags


def build_pipeline(scenario: str, source: EpochSource, batch_size: int, threads: int, max_bytes: int,
                   fused_views: bool | None = None):
    """The scenario's pipeline over ``source``; ``fused_views`` (default
    :data:`FUSED_VIEWS`) picks how ``train``/``simclr``/``multicrop`` make
    their views."""
    import math

    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali import math as dmath
    from nvidia.dali.auto_aug import trivial_augment

    if fused_views is None:
        fused_views = FUSED_VIEWS.get(scenario, True)

    def normalize(images, crop=None, mirror=True):
        kwargs = {"crop": crop} if crop else {}
        return fn.crop_mirror_normalize(
            images,
            dtype=types.FLOAT if scenario == "recipe" else types.FLOAT16,
            output_layout="CHW",
            mean=MEAN,
            std=STD,
            mirror=fn.random.coin_flip(probability=0.5) if mirror else 0,
            **kwargs,
        )

    def random_erasing(images, p: float = 0.1):
        """RandomErasing(p) of normalized CHW images: one rectangle set to zero."""
        area = fn.random.uniform(range=list(ERASE_SCALE))
        aspect = dmath.exp(fn.random.uniform(range=[math.log(ERASE_RATIO[0]), math.log(ERASE_RATIO[1])]))
        shape = fn.stack(dmath.min(dmath.sqrt(area * aspect), 0.99), dmath.min(dmath.sqrt(area / aspect), 0.99))
        anchor = fn.random.uniform(range=[0.0, 1.0], shape=[2]) * (1.0 - shape)
        if fn.random.coin_flip(probability=p, dtype=types.BOOL):
            images = fn.erase(images, anchor=anchor, shape=shape, axis_names="HW", normalized_anchor=True,
                              normalized_shape=True, fill_value=0.0)
        return images

    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=None, prefetch_queue_depth=2,
                  enable_conditionals=scenario == "recipe")
    def pipeline():
        jpegs, label, tag = fn.external_source(source=source, num_outputs=3, batch=True, batch_info=True,
                                               dtype=[types.UINT8, types.INT32, types.INT64])
        if scenario == "raw":
            return fn.pad(jpegs, axes=(0,), shape=(max_bytes,), fill_value=0), label, tag
        if scenario == "val":
            images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
            images = fn.resize(images, resize_shorter=256, interp_type=types.INTERP_LINEAR)
            return normalize(images, crop=(224, 224), mirror=False), label, tag
        if scenario == "recipe":
            (size, scale), = VIEWS[scenario]
            region = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                                   random_area=list(scale), random_aspect_ratio=RATIO,
                                                   num_attempts=10)
            images = fn.resize(region, resize_x=size, resize_y=size, interp_type=types.INTERP_LINEAR)
            images = trivial_augment.trivial_augment_wide(images, fill_value=0, interp_type=types.INTERP_LINEAR)
            return random_erasing(normalize(images)), label, tag
        views = []
        decoded = None if fused_views else fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        for size, scale in VIEWS[scenario]:
            if fused_views:
                region = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                                       random_area=list(scale), random_aspect_ratio=RATIO,
                                                       num_attempts=10)
                crop = fn.resize(region, resize_x=size, resize_y=size, interp_type=types.INTERP_LINEAR)
            else:
                crop = fn.random_resized_crop(decoded, size=(size, size), random_area=list(scale),
                                              random_aspect_ratio=RATIO, num_attempts=10,
                                              interp_type=types.INTERP_LINEAR)
            views.append(normalize(crop))
        return (*views, label, tag)

    return pipeline()


def make_loader(pipe, n_outputs: int):
    """``DALIGenericIterator`` over ``pipe`` ending each epoch where the
    external source raises ``StopIteration`` (``size=-1``, no reader)."""
    from nvidia.dali.plugin.pytorch import DALIGenericIterator

    output_map = [f"image_{k}" for k in range(n_outputs)] + ["label", "tag"]
    return DALIGenericIterator([pipe], output_map, size=-1, auto_reset=True)


class MixedBatches:
    """The recipe's batches: each of ``loader``'s mixed by MixUp or CutMix
    (``recipe_torch.mix_batch``) in torch, as a training loop fed by DALI
    would before its step."""

    def __init__(self, loader, num_classes: int):
        self.loader, self.num_classes = loader, num_classes

    def __iter__(self):
        for batch in self.loader:
            out = batch[0]
            out["image_0"], out["label"] = mix_batch(out["image_0"], out["label"], self.num_classes)
            yield batch


def unpack(batch) -> tuple:
    """A ``DALIGenericIterator`` batch as ``(outputs, labels, tags)``."""
    out = batch[0]
    images = [v for k, v in out.items() if k.startswith("image_")]
    return images, out["label"], out["tag"].reshape(-1)


# ---------------------------------------------------------------- main


def main(argv: list[str]) -> int:
    spec = read_spec(argv, "DALI (CPU) peer runner (see benchmarks/peers/RUNNERS.md)", _T0)

    from nvidia import dali

    scenario = spec["scenario"]
    base = result_base(spec, SYSTEM, dali.__version__, SCENARIOS)
    if base is None:
        return 0

    batch_size, threads = spec["batch_size"], spec["threads"]
    samples = [(str(p), label) for p, label in find_samples(Path(spec["data"]))]
    max_bytes = max(os.path.getsize(p) for p, _ in samples) if scenario == "raw" else 0
    n_views = len(VIEWS.get(scenario, [None]))
    fused = FUSED_VIEWS.get(scenario)
    if scenario == "raw":
        decoder = None
    elif scenario == "val":
        decoder = "fn.decoders.image(device='cpu', output_type=RGB)"
    elif fused:
        decoder = ("fn.decoders.image_random_crop(device='cpu', output_type=RGB, num_attempts=10) per view "
                   "(fused region decode) + fn.resize(resize_x, resize_y, linear)")
    else:
        decoder = ("fn.decoders.image(device='cpu', output_type=RGB) once + "
                   "fn.random_resized_crop(num_attempts=10, linear) per view")
    settings = {
        "data": spec["data"],
        "device_id": None,
        "num_threads": threads,
        "batch_size": batch_size,
        "reader": "fn.external_source(batch=True, batch_info=True): file bytes as uint8 arrays, "
                  f"per-epoch permutation (numpy default_rng((seed {SEED}, epoch))), last batch short, "
                  "StopIteration at the end of each epoch",
        "iterator": "nvidia.dali.plugin.pytorch.DALIGenericIterator(size=-1, auto_reset=True) "
                    "(copies into torch CPU tensors)",
        "prefetch_queue_depth": 2,
        "decoder": decoder,
        "multi_view_decode": None if fused is None else ("fused region decode per view" if fused
                                                         else "one decode, random_resized_crop per view"),
        "output": "uint8 rows padded to the largest file (fn.pad)"
        if scenario == "raw"
        else ("float32 NCHW, soft labels float32 (N, classes)" if scenario == "recipe"
              else "float16 NCHW, label int32 (N, 1)"),
        "recipe": "auto_aug.trivial_augment.trivial_augment_wide(fill_value=0, INTERP_LINEAR) after the resize; "
                  "crop_mirror_normalize float32 with the flip; fn.erase under coin_flip(0.1) (conditionals); "
                  "MixUp(0.2) or CutMix(1.0) in torch on each batch the iterator hands over (recipe_torch)"
                  if scenario == "recipe" else None,
        "views": [f"{s}x{s} area={a}" for s, a in VIEWS.get(scenario, [])]
        or (["resize_shorter 256 + center crop 224"] if scenario == "val" else []),
        "jpeg_decodes_per_image": 0 if scenario == "raw" else (n_views if fused else 1),
        "raw_row_bytes": max_bytes or None,
        "samples_processed_per_epoch": len(samples),
        "first_batch_clock": "start_monotonic" if spec.get("start_monotonic") is not None else "runner first line",
        "cpu_accounting": "getrusage SELF+CHILDREN (+ live child processes from /proc; DALI uses threads)",
        "peak_rss": "ru_maxrss SELF + ru_maxrss CHILDREN",
    }

    source = EpochSource(samples, batch_size, spec["check"])
    pipe = build_pipeline(scenario, source, batch_size, threads, max_bytes)
    loader = make_loader(pipe, n_views)
    if scenario == "recipe":
        num_classes = int(spec.get("num_classes") or max(label for _, label in samples) + 1)
        loader = MixedBatches(loader, num_classes)
    run_classification(spec, base, settings, loader, unpack)
    sys.stdout.flush()
    os._exit(0)  # DALI's worker threads may be mid-epoch (first batch only); nothing to clean up


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
