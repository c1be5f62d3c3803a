"""slipstream's detection runner (system ``slipstream``), implementing the
"Detection" section of ``benchmarks/peers/RUNNERS.md``, with the main
environment's interpreter::

    .venv/bin/python benchmarks/peers/slipstream_detection_runner.py --spec SPEC.json

It reads the slipstream file ``benchmarks/detection.py`` wrote from the same
JPEGs (byte for byte) and boxes (``RGBImageField``, ``RaggedField`` boxes
and labels) through ``presets.detection_train(size)``: IoU crop decoded
from the window only, flip, resize, normalize to float16 CHW, boxes and
labels padded to the dataset's most boxes, with the counts.  The batches
come as a tuple in output order: image, boxes, labels, counts; the timed
loop only counts images (the length of ``counts``).
"""

import time

_T0 = time.monotonic()  # first statement: as RUNNERS.md asks

import sys

# peer_common lives next to this file, on sys.path as the script's folder.
from peer_common import (
    detection_check,
    detection_spec,
    emit,
    peak_rss_mb,
    read_spec,
    timed_epochs,
)

import slipstream as ss
from slipstream.ops import presets


def main(argv: list[str]) -> int:
    spec = detection_spec(read_spec(argv, "slipstream detection runner (see benchmarks/peers/RUNNERS.md)", _T0))
    base = {"system": "slipstream", "version": ss.__version__, "scenario": "detection"}
    batch_size, threads, size = spec["batch_size"], spec["threads"], spec["size"]
    pipelines = presets.detection_train(size=size)
    loader = ss.Loader(spec["data"], batch_size, pipelines, order=ss.Order("random", seed=0), num_threads=threads)
    settings = {
        "data": spec["data"],
        "order": "random, seed 0",
        "memory": "os cache (default)",
        "threads": threads,
        "batch_size": batch_size,
        "batches_ahead": loader.batches_ahead,
        "pipelines": f"presets.detection_train(size={size})",
        "outputs": loader.output_names,
        "format": type(loader.reader).__name__,
    }
    try:
        if spec["check"]:
            emit({**base, "check": detection_check(loader, lambda batch: batch, size, spec["check_epochs"]),
                  "settings": settings})
        else:
            measured = timed_epochs(loader, lambda batch: len(batch[3]), spec["warmup_epochs"], spec["epochs"])
            emit({**base, **measured, "peak_rss_mb": peak_rss_mb(), "settings": settings})
    finally:
        loader.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
