"""MosaicML streaming peer runner (system ``mosaic``), implementing ``benchmarks/peers/RUNNERS.md``.

Run with its own interpreter (``bash benchmarks/peers/install-mosaic.sh``
creates it), over an MDS dataset written from the benchmark's JPEG folder by
``mosaic_write.py`` (each sample: the file's bytes unchanged and its label)::

    benchmarks/.venvs/mosaic/bin/python benchmarks/peers/mosaic_runner.py --spec SPEC.json

The settings streaming documents:

* ``StreamingDataset(local=<folder>, remote=None)`` for a dataset already on
  local disk ("Using locally available datasets",
  https://docs.mosaicml.com/projects/streaming/en/stable/getting_started/faqs_and_tips.html);
* ``shuffle=True`` with the default ``shuffle_algo='py1e'`` and the other
  defaults ("Streaming's default parameters give great performance
  out-of-the-box",
  https://docs.mosaicml.com/projects/streaming/en/stable/distributed_training/performance_tuning.html),
  and ``batch_size`` given to the dataset as well as to the loader, since
  samples are partitioned among workers in groups of the batch size
  ("Sample partitioning",
  https://docs.mosaicml.com/projects/streaming/en/stable/getting_started/main_concepts.html);
* a plain ``torch.utils.data.DataLoader`` with ``num_workers`` = threads and
  ``persistent_workers=True`` ("make sure to set persistent_workers=True",
  faqs_and_tips above), ``pin_memory=True``, ``prefetch_factor`` default;
* the transforms in an overridden ``get_item``, as streaming's own vision
  datasets apply theirs
  (https://github.com/mosaicml/streaming/blob/main/streaming/vision/base.py).

Decoding is the DataLoader peer's, which is also what an MDS ``jpeg`` column
does (``PIL.Image.open`` on the stored bytes): ``.convert('RGB')``,
torchvision's RandomResizedCrop sampling, Pillow BILINEAR resize, flip
p = 0.5, ImageNet normalisation to float16 CHW; ``val`` 256 + centre 224;
``simclr``/``multicrop`` decode once and crop several times; ``raw`` pads
the bytes into uint8 rows.  Workers get ``torch.set_num_threads(1)``.  The
timed loop only counts images (the length of the label batch).

``import streaming`` also imports its ready-made vision datasets, which need
torchvision; the PyPI torchvision for torch 2.13.0 is built against CUDA
torch and fails to import with the CPU torch every peer uses, so
:func:`import_streaming` puts an empty ``streaming.vision`` module in place
first (this runner uses only ``streaming.base``; ``streaming.text`` and
``streaming.multimodal`` import as usual).  Stale shared memory of an
earlier interrupted run is cleared first, as the FAQ advises.

With ``check``, each sample also carries :func:`peer_common.bytes_tag` of
the bytes it was decoded from (RUNNERS.md, "Check").
"""

import time

_T0 = time.monotonic()  # first statement: as RUNNERS.md asks

import sys
import types
from importlib import metadata

import torch
from torch.utils.data import DataLoader

from dataloader_runner import bytes_sample_settings, sample_from_bytes, shutdown_workers, unpack_views, worker_init  # noqa: E402  (the DataLoader peer's decode and views)
from peer_common import read_sidecar, read_spec, result_base, run_classification  # noqa: E402

SYSTEM = "mosaic"
SCENARIOS = ("raw", "train", "val", "simclr", "multicrop")


def import_streaming():
    """``streaming`` without its torchvision-based ``streaming.vision``
    (see the module docstring)."""
    sys.modules.setdefault("streaming.vision", types.ModuleType("streaming.vision"))
    import streaming

    return streaming


streaming = import_streaming()


class JpegBytesDataset(streaming.StreamingDataset):
    """streaming's dataset, decoding each stored JPEG with Pillow into the
    scenario's views (see the module docstring)."""

    def __init__(self, local: str, batch_size: int, scenario: str, check: bool, raw_bytes: int):
        super().__init__(local=local, remote=None, shuffle=True, batch_size=batch_size)
        self.scenario, self.check, self.raw_bytes = scenario, check, raw_bytes

    def get_item(self, idx: int):
        sample = super().get_item(idx)
        return sample_from_bytes(sample["image"], int(sample["label"]), self.scenario, self.raw_bytes, self.check)


def main(argv: list[str]) -> int:
    spec = read_spec(argv, "MosaicML streaming peer runner (see RUNNERS.md)", _T0)
    scenario = spec["scenario"]
    version = (f"mosaicml-streaming {metadata.version('mosaicml-streaming')}, torch {torch.__version__}, "
               f"pillow {metadata.version('pillow')}")
    base = result_base(spec, SYSTEM, version, SCENARIOS)
    if base is None:
        return 0
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    batch_size, threads = spec["batch_size"], spec["threads"]
    raw_bytes = read_sidecar(spec["data"])["max_bytes"] if scenario == "raw" else 0
    dataset = JpegBytesDataset(spec["data"], batch_size, scenario, spec["check"], raw_bytes)
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=threads, pin_memory=True, drop_last=False,
                        persistent_workers=threads > 0, worker_init_fn=worker_init if threads > 0 else None)
    settings = {
        "data": spec["data"],
        "format": "MDSWriter columns {'image': 'bytes', 'label': 'int'}, compression=None, default size_limit",
        "dataset": f"StreamingDataset(local=folder, remote=None, shuffle=True, shuffle_algo='py1e', "
                   f"batch_size={batch_size}) subclass, decode in get_item",
        "loader": f"torch DataLoader(batch_size={batch_size}, num_workers={threads}, pin_memory=True, "
                  f"persistent_workers={threads > 0}, prefetch_factor=2)",
        **bytes_sample_settings(spec, raw_bytes),
    }

    run_classification(spec, base, settings, loader, unpack_views, close=lambda: shutdown_workers(loader))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
