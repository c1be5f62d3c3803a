"""NVIDIA DALI detection runner (system ``dali``), CPU only, implementing the
"Detection" section of ``benchmarks/peers/RUNNERS.md``.

Run with the DALI peer's interpreter (``bash benchmarks/peers/install-dali.sh``
creates it)::

    benchmarks/.venvs/dali/bin/python benchmarks/peers/dali_detection_runner.py --spec SPEC.json

The SSD training pipeline of DALI's own SSD example, on the CPU
(``device_id=None``, ``num_threads=threads``), with DALI's standard operators:

* ``fn.readers.coco`` (``ltrb=True``: XYXY boxes; ``ratio=True``: relative
  to the image, which ``random_bbox_crop`` and ``bb_flip`` work in;
  ``avoid_class_remapping=True``: labels are the file's category ids, as
  for the other systems; ``random_shuffle=True``, ``pad_last_batch=True``);
* ``fn.random_bbox_crop`` (thresholds [0, 0.1, 0.3, 0.5, 0.7, 0.9] +
  ``allow_no_crop``, ``scaling=[0.3, 1]``, ``aspect_ratio=[0.5, 2]``,
  ``num_attempts=40``, ``bbox_layout="xyXY"``; boxes whose centres fall
  outside the window are dropped with their labels).  Two arguments beyond
  DALI's example bring it to torchvision's ``RandomIoUCrop`` semantics:
  ``all_boxes_above_threshold=False`` (one box with enough IoU suffices, not
  every box), and ``input_shape`` (the image's size, from
  ``fn.peek_image_shape``), so that the aspect ratio range applies to the
  window in pixels rather than relative to the image's own aspect ratio;
* ``fn.decoders.image_slice`` decodes only the window (RGB);
* ``fn.bb_flip`` and ``fn.crop_mirror_normalize(mirror=...)`` with one
  ``fn.random.coin_flip(0.5)`` per sample;
* ``fn.resize`` to ``size`` x ``size`` (linear, DALI's default antialiasing),
  then ``crop_mirror_normalize`` to float16 CHW with ImageNet mean/std;
* boxes scaled from relative to output pixels (x ``size``) and padded with
  ``fn.pad`` to ``(max_boxes, 4)``; labels cast to int64 and padded to
  ``(max_boxes,)``; ``counts`` from the shape of the kept labels.

DALI processes whole batches: the last, short batch of an epoch is padded by
the reader and trimmed by the iterator (``LastBatchPolicy.PARTIAL``), so
``ceil(N / batch) * batch`` samples are processed per epoch while ``N`` are
counted.  The timed loop only counts images (the length of ``counts``).
"""

import time

_T0 = time.monotonic()  # first statement: as RUNNERS.md asks

import math
import os
import sys

# peer_common lives next to this file, on sys.path as the script's folder.
from peer_common import (
    detection_check,
    detection_spec,
    emit,
    peak_rss_mb,
    read_coco,
    read_spec,
    timed_epochs,
)

SYSTEM = "dali"
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]
THRESHOLDS = [0.0, 0.1, 0.3, 0.5, 0.7, 0.9]
SCALING = [0.3, 1.0]
ASPECT = [0.5, 2.0]
ATTEMPTS = 40
OUTPUTS = ["image", "boxes", "labels", "counts"]


def build_pipeline(root: str, annotations: str, batch_size: int, threads: int, size: int, max_boxes: int):
    """The DALI pipeline described in the module docstring, built."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=None)
    def pipeline():
        jpegs, boxes, labels = fn.readers.coco(
            file_root=root,
            annotations_file=annotations,
            ltrb=True,
            ratio=True,
            avoid_class_remapping=True,
            random_shuffle=True,
            pad_last_batch=True,
            name="Reader",
        )
        shape_hwc = fn.peek_image_shape(jpegs, dtype=types.INT32)  # input_shape must be int32
        anchor, window, boxes, labels = fn.random_bbox_crop(
            boxes,
            labels,
            thresholds=THRESHOLDS,
            scaling=SCALING,
            aspect_ratio=ASPECT,
            bbox_layout="xyXY",
            allow_no_crop=True,
            num_attempts=ATTEMPTS,
            all_boxes_above_threshold=False,
            input_shape=shape_hwc[0:2],
            shape_layout="HW",
        )
        images = fn.decoders.image_slice(jpegs, anchor, window, device="cpu", output_type=types.RGB)
        flip = fn.random.coin_flip(probability=0.5)
        boxes = fn.bb_flip(boxes, ltrb=True, horizontal=flip)
        images = fn.resize(images, resize_x=size, resize_y=size, interp_type=types.INTERP_LINEAR)
        images = fn.crop_mirror_normalize(
            images, dtype=types.FLOAT16, output_layout="CHW", mean=MEAN, std=STD, mirror=flip
        )
        counts = labels.shape(dtype=types.INT64)[0]
        labels = fn.cast(fn.reshape(labels, shape=[-1]), dtype=types.INT64)
        boxes = fn.pad(boxes * float(size), axes=(0,), shape=(max_boxes,), fill_value=0.0)
        labels = fn.pad(labels, axes=(0,), shape=(max_boxes,), fill_value=0)
        return images, boxes, labels, counts

    pipe = pipeline()
    pipe.build()
    return pipe


def main(argv: list[str]) -> int:
    spec = detection_spec(read_spec(argv, "DALI (CPU) detection runner (see benchmarks/peers/RUNNERS.md)", _T0))

    from nvidia import dali
    from nvidia.dali.plugin.base_iterator import LastBatchPolicy
    from nvidia.dali.plugin.pytorch import DALIGenericIterator

    base = {"system": SYSTEM, "version": dali.__version__, "scenario": "detection"}
    batch_size, threads, size, max_boxes = spec["batch_size"], spec["threads"], spec["size"], spec["max_boxes"]
    root = os.path.abspath(spec["images"])
    images = len(read_coco(spec["annotations"]))
    settings = {
        "data": spec["images"],
        "annotations": spec["annotations"],
        "device_id": None,
        "num_threads": threads,
        "batch_size": batch_size,
        "reader": "fn.readers.coco(ltrb=True, ratio=True, avoid_class_remapping=True, random_shuffle=True, "
                  "initial_fill=1024 default, pad_last_batch=True)",
        "last_batch_policy": "PARTIAL",
        "prefetch_queue_depth": 2,
        "crop": f"fn.random_bbox_crop(thresholds={THRESHOLDS}, allow_no_crop=True, scaling={SCALING}, "
                f"aspect_ratio={ASPECT}, num_attempts={ATTEMPTS}, bbox_layout='xyXY', "
                "all_boxes_above_threshold=False, input_shape=peek_image_shape HW)",
        "decoder": "fn.decoders.image_slice(device='cpu', output_type=RGB): the crop window only",
        "resize": f"fn.resize({size}x{size}, INTERP_LINEAR, antialias default)",
        "flip": "fn.random.coin_flip(0.5) -> fn.bb_flip + crop_mirror_normalize(mirror=)",
        "output": f"image float16 (B, 3, {size}, {size}); boxes float32 (B, {max_boxes}, 4) XYXY output pixels "
                  f"(fn.pad); labels int64 (B, {max_boxes}) (fn.cast + fn.pad); counts int64 (B,) (labels.shape()[0])",
        "samples_processed_per_epoch": math.ceil(images / batch_size) * batch_size,
        "iterator": "nvidia.dali.plugin.pytorch.DALIGenericIterator (copies into torch CPU tensors)",
        "cpu_accounting": "getrusage SELF+CHILDREN (+ live child processes from /proc; DALI uses threads)",
        "peak_rss": "ru_maxrss SELF + ru_maxrss CHILDREN",
    }

    pipe = build_pipeline(root, os.path.abspath(spec["annotations"]), batch_size, threads, size, max_boxes)
    loader = DALIGenericIterator(
        [pipe], OUTPUTS, reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True
    )

    def unpack(batch):
        outputs = batch[0]
        return tuple(outputs[name] for name in OUTPUTS)

    if spec["check"]:
        emit({**base, "check": detection_check(loader, unpack, size, spec["check_epochs"]), "settings": settings})
    else:
        measured = timed_epochs(loader, lambda batch: len(batch[0]["counts"]), spec["warmup_epochs"], spec["epochs"])
        emit({**base, **measured, "peak_rss_mb": peak_rss_mb(), "settings": settings})
    sys.stdout.flush()
    os._exit(0)  # DALI's worker threads need no clean-up, and its shutdown can be slow


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
