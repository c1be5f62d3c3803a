"""NVIDIA DALI peer runner (system ``dali``), CPU only, implementing
``benchmarks/peers/RUNNERS.md``.

Run with its own interpreter (``bash benchmarks/peers/install-dali.sh``
creates it), over a folder of JPEGs (flat, class = file-name prefix before the
first underscore, or ``root/<class>/<image>``)::

    benchmarks/.venvs/dali/bin/python benchmarks/peers/dali_runner.py --spec SPEC.json

The pipeline runs with ``device_id=None`` (no GPU: every operator on the CPU,
``num_threads=threads``), fed by ``fn.readers.file`` (``random_shuffle=True``,
``pad_last_batch=True``) and handed to PyTorch by the plugin's
``DALIGenericIterator`` (``LastBatchPolicy.PARTIAL``, so a short last batch
like ``drop_last=False``).  Only DALI's standard operators:

* ``train``: ``fn.decoders.image(device='cpu')``, ``fn.random_resized_crop``
  (224, area (0.08, 1), aspect (3/4, 4/3), 10 attempts, linear),
  ``fn.crop_mirror_normalize`` (float16, CHW, ImageNet mean/std, mirror =
  ``fn.random.coin_flip(0.5)``);
* ``val``: decode, ``fn.resize(resize_shorter=256)`` (linear),
  ``fn.crop_mirror_normalize(crop=(224, 224))`` (centre);
* ``raw``: the reader's encoded bytes, ``fn.pad`` ded with zeros to the largest
  file of the folder (a fixed uint8 row, as the DataLoader peer does);
* ``simclr`` / ``multicrop``: decode once, then one ``random_resized_crop`` +
  ``crop_mirror_normalize`` per view (2 x 224; or 2 x 224 area (0.4, 1) +
  6 x 96 area (0.05, 0.4)).

DALI always processes whole batches: the last, short batch of an epoch is
padded by the reader (the last sample repeated) and trimmed by the iterator,
so ``ceil(N / batch) * batch`` samples are decoded per epoch while ``N`` are
counted.  The timed loop only counts images (the length of the label batch).
"""

import time

_T0 = time.monotonic()  # first statement: as RUNNERS.md asks

import math
import os
import sys
from pathlib import Path

from peer_common import emit, find_samples, peak_rss_mb, read_spec, timed_epochs  # noqa: E402  (benchmarks/peers, next to this file)

SYSTEM = "dali"
SCENARIOS = ("raw", "train", "val", "simclr", "multicrop")
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]
VIEWS = {
    "train": [(224, (0.08, 1.0))],
    "simclr": [(224, (0.08, 1.0))] * 2,
    "multicrop": [(224, (0.4, 1.0))] * 2 + [(96, (0.05, 0.4))] * 6,
}



# ---------------------------------------------------------------- data



def build_pipeline(scenario: str, root: str, samples, batch_size: int, threads: int, max_bytes: int):
    from nvidia.dali import fn, pipeline_def, types

    files = [f for f, _ in samples]
    labels = [label for _, label in samples]

    def normalize(images, crop=None, mirror=True):
        kwargs = {"crop": crop} if crop else {}
        return fn.crop_mirror_normalize(
            images,
            dtype=types.FLOAT16,
            output_layout="CHW",
            mean=MEAN,
            std=STD,
            mirror=fn.random.coin_flip(probability=0.5) if mirror else 0,
            **kwargs,
        )

    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=None)
    def pipeline():
        jpegs, label = fn.readers.file(
            file_root=root,
            files=files,
            labels=labels,
            random_shuffle=True,
            pad_last_batch=True,
            name="Reader",
        )
        if scenario == "raw":
            return fn.pad(jpegs, axes=(0,), shape=(max_bytes,), fill_value=0), label
        images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        if scenario == "val":
            images = fn.resize(images, resize_shorter=256, interp_type=types.INTERP_LINEAR)
            return normalize(images, crop=(224, 224), mirror=False), label
        views = []
        for size, scale in VIEWS[scenario]:
            crop = fn.random_resized_crop(
                images,
                size=(size, size),
                random_area=list(scale),
                random_aspect_ratio=[3 / 4, 4 / 3],
                num_attempts=10,
                interp_type=types.INTERP_LINEAR,
            )
            views.append(normalize(crop))
        return (*views, label)

    return pipeline()


# ---------------------------------------------------------------- main


def main(argv: list[str]) -> int:
    spec = read_spec(argv, "DALI (CPU) peer runner (see benchmarks/peers/RUNNERS.md)", _T0)

    from nvidia import dali

    scenario = spec["scenario"]
    base = {"system": SYSTEM, "version": dali.__version__, "scenario": scenario}
    if scenario not in SCENARIOS:
        emit({**base, "unsupported": f"unknown scenario {scenario!r}"})
        return 0

    batch_size, threads, epochs = spec["batch_size"], spec["threads"], spec["epochs"]
    warmup, first_batch_only, start = spec["warmup_epochs"], spec["first_batch_only"], spec["start"]

    from nvidia.dali.plugin.base_iterator import LastBatchPolicy
    from nvidia.dali.plugin.pytorch import DALIGenericIterator

    root = str(Path(spec["data"]).resolve())
    samples = [(str(p.relative_to(root)), label) for p, label in find_samples(Path(root))]
    max_bytes = max(os.path.getsize(os.path.join(root, f)) for f, _ in samples) if scenario == "raw" else 0
    n_views = len(VIEWS.get(scenario, [None]))
    output_map = [f"image_{k}" for k in range(n_views)] + ["label"]
    settings = {
        "data": spec["data"],
        "device_id": None,
        "num_threads": threads,
        "batch_size": batch_size,
        "reader": "fn.readers.file(random_shuffle=True, initial_fill=1024 default, pad_last_batch=True)",
        "last_batch_policy": "PARTIAL",
        "prefetch_queue_depth": 2,
        "decoder": None if scenario == "raw" else "fn.decoders.image(device='cpu', output_type=RGB)",
        "output": "uint8 rows padded to the largest file (fn.pad)"
        if scenario == "raw"
        else "float16 NCHW, label int32 (N, 1)",
        "views": [f"random_resized_crop {s}x{s} area={a}" for s, a in VIEWS.get(scenario, [])]
        or (["resize_shorter 256 + center crop 224"] if scenario == "val" else []),
        "jpeg_decodes_per_image": 0 if scenario == "raw" else 1,
        "raw_row_bytes": max_bytes or None,
        "samples_processed_per_epoch": math.ceil(len(samples) / batch_size) * batch_size,
        "iterator": "nvidia.dali.plugin.pytorch.DALIGenericIterator (copies into torch CPU tensors)",
        "first_batch_clock": "start_monotonic" if spec.get("start_monotonic") is not None else "runner first line",
        "cpu_accounting": "getrusage SELF+CHILDREN (+ live child processes from /proc; DALI uses threads)",
        "peak_rss": "ru_maxrss SELF + ru_maxrss CHILDREN",
    }

    pipe = build_pipeline(scenario, root, samples, batch_size, threads, max_bytes)
    pipe.build()
    loader = DALIGenericIterator(
        [pipe],
        output_map,
        reader_name="Reader",
        last_batch_policy=LastBatchPolicy.PARTIAL,
        auto_reset=True,
    )

    if first_batch_only:
        batch = next(iter(loader))
        first = time.monotonic() - start
        emit(
            {
                **base,
                "first_batch_s": first,
                "images": len(batch[0]["label"]),
                "peak_rss_mb": peak_rss_mb(),
                "settings": settings,
            }
        )
        sys.stdout.flush()
        os._exit(0)  # DALI's worker threads are mid-epoch; nothing to clean up

    measured = timed_epochs(loader, lambda batch: len(batch[0]["label"]), warmup, epochs)
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
