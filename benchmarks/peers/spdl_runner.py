"""SPDL peer runner (system ``spdl``), implementing ``benchmarks/peers/RUNNERS.md``.

Run with its own interpreter (``bash benchmarks/peers/install-spdl.sh``
creates it), over the same folder of JPEGs as the DataLoader peer::

    benchmarks/.venvs/spdl/bin/python benchmarks/peers/spdl_runner.py --spec SPEC.json

SPDL's own fast path, as its documentation describes it:

* a thread-based ``spdl.pipeline`` (``PipelineBuilder``: source ->
  ``pipe(decode, concurrency=threads)`` -> ``aggregate(batch_size)`` ->
  ``pipe(batchify)`` -> ``add_sink`` -> ``build(num_threads=threads)``), the
  structure of the "Migrating from PyTorch DataLoader" guide
  (https://facebookresearch.github.io/spdl/latest/migration/pytorch.html) and
  of "Best Practices"
  (https://facebookresearch.github.io/spdl/latest/best_practice.html): decode
  every image in a worker thread (``spdl.io`` releases the GIL), keep the
  decoded ``ImageFrames`` as FFmpeg frames, and make one contiguous batch
  with ``spdl.io.convert_frames`` + ``spdl.io.to_torch`` (no per-image
  tensor);
* decoding with ``spdl.io.demux_image`` on the file's bytes (read in the
  thread: the "download, then decode" split of "Best Practices") and
  ``spdl.io.decode_packets`` with an FFmpeg filter description doing the
  crop, the resize and the flip inside the decoder's filter graph, as "Filter
  Graphs" recommends over post-processing
  (https://facebookresearch.github.io/spdl/latest/io/filtering.html);
* for several views of one image (``simclr``, ``multicrop``) the image is
  decoded once (``filter_desc=None``) and a ``spdl.io.FilterGraph`` with a
  ``split`` into one labelled ``buffersink`` per view makes them, the
  "Multiple Output Graphs" recipe of "Advanced Filter Graphs"
  (https://facebookresearch.github.io/spdl/latest/io/advanced_filtering.html).

Scenarios, with the crops drawn in Python exactly as the DataLoader peer
draws them (torchvision's RandomResizedCrop sampling; the image size comes
from the demuxed packets' codec, before decoding):

* ``train``: ``crop=w:h:x:y,scale=224:224:flags=bilinear[,hflip],format=rgb24``
  (FFmpeg's crop rounds x and y down to the chroma subsampling of the YUV
  frame: at most one pixel off on 4:2:0 JPEGs);
* ``val``: ``scale`` of the shorter side to 256 (bilinear), ``crop`` 224 in
  the centre, ``format=rgb24``;
* ``simclr`` / ``multicrop``: 2 x 224, or 2 x 224 scale (0.4, 1) + 6 x 96
  scale (0.05, 0.4), each cropped, resized, flipped with p = 0.5;
* ``raw``: each file's bytes in a uint8 row padded with zeros to the largest
  file of the folder (the DataLoader peer's layout), no decoding;
* ``recipe``: torchvision's reference training recipe.  SPDL has no
  augmentation policy, so past its decoder's filter graph (the train view
  at 176) each image goes through the DataLoader peer's Pillow
  TrivialAugmentWide in the decode stage's thread (``pillow_augment``;
  Pillow releases the GIL in its image operations), and ``batchify``
  normalises into float32, erases one rectangle with probability 0.1 per
  image and mixes the batch by MixUp(0.2) or CutMix(1.0)
  (``recipe_torch``): float32 images, soft labels.

Normalisation (ImageNet mean/std) into float16 NCHW happens in ``batchify``
on the whole uint8 batch with torch, since SPDL has no normalising operator
(its ImageNet example normalises the batch with torch too).  The source
shuffles the sample list each epoch (seeded).  The timed loop only counts
images (the length of the label batch).

With ``check``, each sample also carries :func:`peer_common.bytes_tag` of
the bytes it was decoded from (RUNNERS.md, "Check").
"""

import time

_T0 = time.monotonic()  # first statement: as RUNNERS.md asks

import os
import random
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import spdl.io
import spdl.io.utils
import torch
from spdl.pipeline import PipelineBuilder

from peer_common import bytes_tag, find_samples, read_spec, result_base, run_classification  # noqa: E402  (benchmarks/peers, next to this file)
from dataloader_runner import VIEWS, random_resized_crop_box, recipe_num_classes  # noqa: E402  (the DataLoader peer's crop sampling)
from PIL import Image  # noqa: E402
from pillow_augment import trivial_augment_wide  # noqa: E402
from recipe_torch import mix_batch, random_erasing  # noqa: E402

SYSTEM = "spdl"
SCENARIOS = ("raw", "train", "val", "simclr", "multicrop", "recipe")
MEAN255 = torch.tensor([0.485, 0.456, 0.406]).mul(255).view(1, 3, 1, 1)
INV_STD255 = torch.tensor([0.229, 0.224, 0.225]).mul(255).reciprocal().view(1, 3, 1, 1)
SINK_BUFFER = 2  # batches held ready, the DataLoader peer's prefetch depth


def view_filter(width: int, height: int, size: int, scale: tuple[float, float]) -> str:
    """The FFmpeg filter chain of one random-resized-crop view."""
    left, top, right, bottom = random_resized_crop_box(width, height, scale)
    chain = f"crop={right - left}:{bottom - top}:{left}:{top},scale={size}:{size}:flags=bilinear"
    if random.random() < 0.5:
        chain += ",hflip"
    return chain + ",format=rgb24"


def val_filter(width: int, height: int) -> str:
    """Shorter side to 256, centre crop 224 (the DataLoader peer's rounding)."""
    w, h = (256, int(256 * height / width)) if width <= height else (int(256 * width / height), 256)
    top, left = round((h - 224) / 2.0), round((w - 224) / 2.0)
    return f"scale={w}:{h}:flags=bilinear,crop=224:224:{left}:{top},format=rgb24"


def make_decode(scenario: str, check: bool):
    """The per-sample stage: read the file, demux, decode into one
    ``ImageFrames`` per view (or the bytes for ``raw``)."""

    def decode(item):
        path, label = item
        with open(path, "rb") as fh:
            data = fh.read()
        tag = bytes_tag(data) if check else 0
        if scenario == "raw":
            return [data], label, tag
        packets = spdl.io.demux_image(data)
        codec = packets.codec
        width, height = codec.width, codec.height
        if scenario == "val":
            return [spdl.io.decode_packets(packets, filter_desc=val_filter(width, height))], label, tag
        views = VIEWS[scenario]
        if len(views) == 1:
            size, scale = views[0]
            frames = spdl.io.decode_packets(packets, filter_desc=view_filter(width, height, size, scale))
            if scenario == "recipe":
                pixels = spdl.io.to_numpy(spdl.io.convert_frames(frames))
                return [np.asarray(trivial_augment_wide(Image.fromarray(pixels)))], label, tag
            return [frames], label, tag
        frames = spdl.io.decode_packets(packets, filter_desc=None)
        graph = spdl.io.FilterGraph(";".join(
            [f"{spdl.io.get_buffer_desc(codec)} [in]", f"[in] split={len(views)} " + "".join(f"[s{i}]" for i in range(len(views)))]
            + [f"[s{i}] {view_filter(width, height, size, scale)} [v{i}]" for i, (size, scale) in enumerate(views)]
            + [f"[v{i}] buffersink@v{i}" for i in range(len(views))]))
        graph.add_frames(frames)
        graph.flush()
        return [graph.get_frames(key=f"buffersink@v{i}") for i in range(len(views))], label, tag

    return decode


def make_batchify(scenario: str, max_bytes: int, num_classes: int = 0):
    """The per-batch stage: one contiguous tensor per view, normalised into
    float16 NCHW, plus the labels and the bytes tags (``recipe``: the
    augmented images normalised into float32, erased and mixed into
    ``num_classes`` soft labels)."""

    def batchify(items):
        labels = torch.tensor([label for _, label, _ in items], dtype=torch.int64)
        tags = torch.tensor([tag for _, _, tag in items], dtype=torch.int64)
        if scenario == "raw":
            rows = np.zeros((len(items), max_bytes), dtype=np.uint8)
            for row, ([data], _, _) in zip(rows, items):
                row[: len(data)] = np.frombuffer(data, dtype=np.uint8)
            return [torch.from_numpy(rows)], labels, tags
        if scenario == "recipe":
            x = torch.from_numpy(np.stack([views[0] for views, _, _ in items])).permute(0, 3, 1, 2).to(torch.float32)
            x.sub_(MEAN255).mul_(INV_STD255)
            for image in x:
                random_erasing(image, 0.1)
            images, soft = mix_batch(x, labels, num_classes)
            return [images], soft, tags
        outputs = []
        for v in range(len(items[0][0])):
            batch = spdl.io.to_torch(spdl.io.convert_frames([views[v] for views, _, _ in items]))
            # A FilterGraph's outputs are one-frame VideoFrames: (N, 1, H, W, 3) where ImageFrames give (N, H, W, 3).
            nhwc = batch.reshape(len(items), *batch.shape[-3:])
            x = nhwc.permute(0, 3, 1, 2).to(torch.float32)
            x.sub_(MEAN255).mul_(INV_STD255)
            outputs.append(x.to(torch.float16, memory_format=torch.contiguous_format))
        return outputs, labels, tags

    return batchify


class EpochPipelines:
    """Iterable over one epoch's batches: a new seeded shuffle of the
    samples and a new pipeline per epoch (an SPDL pipeline runs its source
    once)."""

    def __init__(self, samples, scenario: str, batch_size: int, threads: int, check: bool, seed: int = 0,
                 num_classes: int = 0):
        self.samples, self.batch_size, self.threads = samples, batch_size, threads
        self.decode = make_decode(scenario, check)
        max_bytes = max(os.path.getsize(p) for p, _ in samples) if scenario == "raw" else 0
        self.batchify = make_batchify(scenario, max_bytes, num_classes)
        self.rng = random.Random(seed)

    def __iter__(self):
        order = list(self.samples)
        self.rng.shuffle(order)
        pipeline = (
            PipelineBuilder()
            .add_source(order)
            .pipe(self.decode, concurrency=self.threads)
            .aggregate(self.batch_size)
            .pipe(self.batchify)
            .add_sink(SINK_BUFFER)
            # A failing sample must stop the run, not be dropped (SPDL's default):
            # every system counts exactly the images it decodes.
            .build(num_threads=self.threads, max_failures=0)
        )
        with pipeline.auto_stop():
            yield from pipeline.get_iterator()


def main(argv: list[str]) -> int:
    spec = read_spec(argv, "SPDL peer runner (see RUNNERS.md)", _T0)
    scenario = spec["scenario"]
    version = f"spdl {metadata.version('spdl')}, spdl_io {metadata.version('spdl_io')}, torch {torch.__version__}"
    base = result_base(spec, SYSTEM, version, SCENARIOS)
    if base is None:
        return 0
    batch_size, threads = spec["batch_size"], spec["threads"]
    samples = [(str(p), label) for p, label in find_samples(Path(spec["data"]))]
    loader = EpochPipelines(samples, scenario, batch_size, threads, spec["check"],
                            num_classes=recipe_num_classes(spec, samples))
    settings = {
        "data": spec["data"],
        "order": "random.shuffle of the sample list per epoch (seed 0); output_order='completion'",
        "pipeline": f"source -> pipe(decode, concurrency={threads}) -> aggregate({batch_size}) -> pipe(batchify) "
                    f"-> add_sink({SINK_BUFFER}) -> build(num_threads={threads})",
        "decoder": "spdl.io.demux_image(bytes) + decode_packets(filter_desc): FFmpeg's mjpeg decoder, libavcodec "
                   + ".".join(map(str, spdl.io.utils.get_ffmpeg_versions()["libavcodec"])),
        "resize": "FFmpeg filter graph: crop, scale flags=bilinear, hflip, format=rgb24 "
                  "(several views: one decode, split, one chain per view)",
        "normalize": "torch on the uint8 batch in batchify, float16 NCHW"
        + (" (recipe: float32)" if scenario == "recipe" else ""),
        "recipe": "after the filter graph's crop and flip: TrivialAugmentWide with Pillow in the decode stage "
                  "(pillow_augment, bilinear, black fill); in batchify Normalize to float32, RandomErasing(0.1) per "
                  "image, MixUp(0.2) or CutMix(1.0) on the batch (recipe_torch)" if scenario == "recipe" else None,
        "output": "uint8 rows padded to the largest file" if scenario == "raw"
        else ("float32 NCHW, soft labels float32 (N, classes)" if scenario == "recipe"
              else "float16 NCHW (contiguous), label int64"),
        "jpeg_decodes_per_image": 0 if scenario == "raw" else 1,
        "torch_threads": torch.get_num_threads(),
        "first_batch_clock": "start_monotonic" if spec.get("start_monotonic") is not None else "runner first line",
        "cpu_accounting": "getrusage SELF (one process, threads only)",
    }
    run_classification(spec, base, settings, loader, lambda batch: batch)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
