"""FFCV peer runner (system ``ffcv``), implementing ``benchmarks/peers/RUNNERS.md``.

Run with the FFCV peer interpreter, over a ``.beton`` written by ``ffcv_write.py``::

    benchmarks/.venvs/ffcv/bin/python benchmarks/peers/ffcv_runner.py --spec SPEC.json

Scenarios, all with FFCV's own standard operations only:

* ``train``: ``RandomResizedCropRGBImageDecoder((224, 224))`` (torchvision's
  default scale (0.08, 1) and ratio (3/4, 4/3)), ``RandomHorizontalFlip()``,
  ``NormalizeImage(mean*255, std*255, np.float16)``, ``ToTensor()``,
  ``ToTorchImage()`` -> float16 N x 3 x 224 x 224 (channels-last memory).
  Label: ``IntDecoder(), ToTensor(), Squeeze()``.  This is the pipeline of
  FFCV's ImageNet example less its ``ToDevice``; on CPU ``NormalizeImage`` has
  to come *before* ``ToTensor`` (see ``NORMALIZE_NOTE``).
* ``val``: ``CenterCropRGBImageDecoder((224, 224), ratio=224/256)`` + the same
  normalisation (FFCV's ImageNet validation pipeline).
* ``simclr`` / ``multicrop``: one pipeline per view, every extra view a
  ``PipelineSpec(source='image', decoder=..., transforms=...)``: FFCV 1.0's
  mechanism for several distinct pipelines over one field (libffcv/ffcv
  issue #82, fixed in 1.0.0).  FFCV's decoders fuse decoding with the crop and
  its crop-after-decode transforms need constant-size images, so each view
  decodes the JPEG again (2 decodes per image for simclr, 8 for multicrop).
* ``raw``: ``BytesDecoder(), ToTensor()`` over the ``.beton`` written by
  ``ffcv_write.py --bytes`` (see ``RAW_NOTE``).

Loader: ``order=OrderOption.RANDOM`` (true shuffling, the equivalent of the
DataLoader's ``shuffle=True``; QUASI_RANDOM only pays off when the file does
not fit in the page cache, ``os_cache=False``), ``os_cache=True``,
``num_workers=threads``, ``drop_last=False``, ``distributed=False``,
``batches_ahead`` at its default (3).  The timed loop only counts images (the
length of the label batch).
"""

import time

_T0 = time.monotonic()  # first statement: as RUNNERS.md asks


import os
import sys
from importlib import metadata

import numpy as np

from peer_common import emit, peak_rss_mb, read_spec, result_base, timed_epochs  # noqa: E402  (benchmarks/peers, next to this file)

SYSTEM = "ffcv"
MEAN = np.array([0.485, 0.456, 0.406]) * 255
STD = np.array([0.229, 0.224, 0.225]) * 255
SCENARIOS = ("raw", "train", "val", "simclr", "multicrop")

RAW_NOTE = (
    "FFCV cannot hand over an RGBImageField's stored JPEG bytes (its decoders for that field all decode to pixels, "
    "and BytesDecoder only reads a BytesField's metadata), so the raw scenario reads a second .beton, written by "
    "ffcv_write.py --bytes, whose image field is a BytesField holding each file's bytes: BytesDecoder() + ToTensor() "
    "-> uint8 N x max_size rows"
)

NORMALIZE_NOTE = (
    "NormalizeImage before ToTensor/ToTorchImage: on CPU NormalizeImage is a jitted (numba) stage, and FFCV 1.0.2's "
    "Graph.group_operations never terminates for jitted -> torch -> jitted pipelines (the documented GPU order "
    "ToTensor, ToDevice, ToTorchImage, NormalizeImage only works because NormalizeImage is not jitted on GPU); "
    "the output is the same float16 NCHW (channels-last) batch"
)



# ---------------------------------------------------------------- pipelines


def image_views(scenario: str) -> list[tuple[str, object, str]]:
    """(name, decoder, description) per image output of the scenario."""
    from ffcv.fields.rgb_image import CenterCropRGBImageDecoder, RandomResizedCropRGBImageDecoder

    def rrc(size: int, scale=(0.08, 1.0)):
        return RandomResizedCropRGBImageDecoder((size, size), scale=scale, ratio=(3 / 4, 4 / 3))

    if scenario == "train":
        return [("image", rrc(224), "RandomResizedCropRGBImageDecoder((224,224)) + flip")]
    if scenario == "val":
        return [
            (
                "image",
                CenterCropRGBImageDecoder((224, 224), ratio=224 / 256),
                "CenterCropRGBImageDecoder((224,224), ratio=224/256)",
            )
        ]
    if scenario == "simclr":
        return [(name, rrc(224), "RandomResizedCropRGBImageDecoder((224,224)) + flip") for name in ("image", "image_1")]
    if scenario == "raw":
        return [("image", None, "BytesDecoder() over the BytesField .beton (ffcv_write.py --bytes)")]
    if scenario == "multicrop":
        views = [
            (
                f"image_{k}" if k else "image",
                rrc(224, (0.4, 1.0)),
                "RandomResizedCropRGBImageDecoder((224,224), scale=(0.4,1)) + flip",
            )
            for k in range(2)
        ]
        views += [
            (f"image_{k}", rrc(96, (0.05, 0.4)), "RandomResizedCropRGBImageDecoder((96,96), scale=(0.05,0.4)) + flip")
            for k in range(2, 8)
        ]
        return views
    raise ValueError(scenario)


def build_pipelines(scenario: str) -> dict:
    from ffcv.fields.basics import IntDecoder
    from ffcv.pipeline import PipelineSpec
    from ffcv.transforms import NormalizeImage, RandomHorizontalFlip, Squeeze, ToTensor, ToTorchImage

    pipelines: dict = {"label": [IntDecoder(), ToTensor(), Squeeze()]}
    if scenario == "raw":
        from ffcv.fields.bytes import BytesDecoder

        pipelines["image"] = [BytesDecoder(), ToTensor()]
        return pipelines
    for name, decoder, _ in image_views(scenario):
        # Fresh operation objects per view: FFCV identifies graph nodes by operation.
        ops = [] if scenario == "val" else [RandomHorizontalFlip()]
        ops += [NormalizeImage(MEAN, STD, np.float16), ToTensor(), ToTorchImage()]
        if name == "image":
            pipelines[name] = [decoder, *ops]
        else:
            pipelines[name] = PipelineSpec("image", decoder=decoder, transforms=ops)
    return pipelines


# ---------------------------------------------------------------- main


def main(argv: list[str]) -> int:
    spec = read_spec(argv, "FFCV peer runner (see benchmarks/peers/RUNNERS.md)", _T0)

    scenario = spec["scenario"]
    version = metadata.version("ffcv")  # ffcv.__version__ still says 0.0.3rc1 in 1.0.2
    base = result_base(spec, SYSTEM, version, SCENARIOS)
    if base is None:
        return 0
    batch_size, threads, epochs = spec["batch_size"], spec["threads"], spec["epochs"]
    warmup, first_batch_only, start = spec["warmup_epochs"], spec["first_batch_only"], spec["start"]

    from ffcv.loader import Loader, OrderOption

    views = image_views(scenario)
    settings = {
        "data": spec["data"],
        "order": "RANDOM",
        "os_cache": True,
        "num_workers": threads,
        "batch_size": batch_size,
        "drop_last": False,
        "distributed": False,
        "batches_ahead": 3,
        "pinned_memory": False,
        "output": "uint8 N x max_size, label int64" if scenario == "raw"
        else "float16 NCHW (channels-last memory), label int64",
        "views": [desc for _, _, desc in views],
        "jpeg_decodes_per_image": 0 if scenario == "raw" else len(views),
        "pipeline_order": "BytesDecoder, ToTensor" if scenario == "raw"
        else "decoder, [RandomHorizontalFlip], NormalizeImage(float16), ToTensor, ToTorchImage",
        "normalize_note": RAW_NOTE if scenario == "raw" else NORMALIZE_NOTE,
        "extra_views_via": "PipelineSpec(source='image', decoder=..., transforms=...)" if len(views) > 1 else None,
        "first_batch_clock": "start_monotonic" if spec.get("start_monotonic") is not None else "runner first line",
        "cpu_accounting": "getrusage SELF+CHILDREN (+ live child processes from /proc; FFCV uses threads, no children)",
        "peak_rss": "ru_maxrss SELF + ru_maxrss CHILDREN",
    }

    loader = Loader(
        spec["data"],
        batch_size=batch_size,
        num_workers=threads,
        os_cache=True,
        order=OrderOption.RANDOM,
        distributed=False,
        drop_last=False,
        pipelines=build_pipelines(scenario),
    )
    label_ix = list(loader.pipeline_specs).index("label")

    if first_batch_only:
        batch = next(iter(loader))
        first = time.monotonic() - start
        emit(
            {
                **base,
                "first_batch_s": first,
                "images": len(batch[label_ix]),
                "peak_rss_mb": peak_rss_mb(),
                "settings": settings,
            }
        )
        os._exit(0)  # the epoch's producer thread is mid-way; nothing to clean up

    measured = timed_epochs(loader, lambda batch: len(batch[label_ix]), warmup, epochs)
    emit(
        {
            **base,
            **measured,
            "peak_rss_mb": peak_rss_mb(),
            "settings": settings,
        }
    )
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
