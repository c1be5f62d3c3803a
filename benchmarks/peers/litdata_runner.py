"""LitData peer runner (system ``litdata``), implementing ``benchmarks/peers/RUNNERS.md``.

Run with its own interpreter (``bash benchmarks/peers/install-litdata.sh``
creates it), over a LitData optimized dataset written from the benchmark's
JPEG folder by ``litdata_write.py`` (each sample: the file's bytes unchanged
and its label)::

    benchmarks/.venvs/litdata/bin/python benchmarks/peers/litdata_runner.py --spec SPEC.json

What LitData documents for fast training, and how its own ImageNet benchmark
(https://github.com/Lightning-AI/litData/blob/main/benchmarks/litdata/stream_imagenet.py)
streams:

* ``StreamingDataset(input_dir=<local folder>, shuffle=True)`` subclassed, the
  transforms applied in its ``__getitem__`` on what ``super().__getitem__``
  deserialized;
* ``StreamingDataLoader`` (README: "Prefer StreamingDataLoader over a plain
  PyTorch DataLoader for optimized / combined / parallel datasets",
  https://github.com/Lightning-AI/litData#streaming-kwargs) with
  ``num_workers`` = the CPU count (``os.cpu_count()``, the benchmark's
  default and the README's resumable-loader example), ``batch_size`` 128;
* ``max_pre_download`` left at 2 and no ``cache_dir``/``max_cache_size``:
  the input is a local folder, read in place.

Decoding deviates in one point from that benchmark, which lets LitData's
JPEG serializer decode with ``torchvision.io.decode_jpeg``: torchvision's
Linux wheels on PyPI are built against CUDA torch and do not load with the
CPU torch 2.13.0 wheel every peer uses (``operator torchvision::nms does not
exist``; ``_C.so`` needs ``libtorch_cuda.so``), so the stored ``bytes`` are
decoded with Pillow exactly as the DataLoader peer decodes them
(``dataloader_runner``: ``Image.open(...).convert('RGB')``, torchvision's
RandomResizedCrop sampling, Pillow BILINEAR resize, flip p = 0.5, ImageNet
normalisation to float16 CHW; ``val`` 256 + centre 224; ``simclr`` and
``multicrop`` decode once and crop several times; ``raw`` pads the bytes
into uint8 rows as the DataLoader peer does).  Workers get
``torch.set_num_threads(1)``, as in the DataLoader peer.  The timed loop
only counts images (the length of the label batch).

With ``check``, each sample also carries :func:`peer_common.bytes_tag` of
the bytes it was decoded from (RUNNERS.md, "Check").
"""

import time

_T0 = time.monotonic()  # first statement: as RUNNERS.md asks

import sys
from importlib import metadata

import torch
from litdata import StreamingDataLoader, StreamingDataset

from dataloader_runner import bytes_sample_settings, sample_from_bytes, shutdown_workers, unpack_views, worker_init  # noqa: E402  (the DataLoader peer's decode and views)
from peer_common import read_sidecar, read_spec, result_base, run_classification  # noqa: E402

SYSTEM = "litdata"
SCENARIOS = ("raw", "train", "val", "simclr", "multicrop")


class JpegBytesDataset(StreamingDataset):
    """LitData's dataset, decoding each stored JPEG with Pillow into the
    scenario's views (see the module docstring)."""

    def __init__(self, input_dir: str, scenario: str, check: bool, raw_bytes: int):
        super().__init__(input_dir=input_dir, shuffle=True)
        self.scenario, self.check, self.raw_bytes = scenario, check, raw_bytes

    def __getitem__(self, index):
        sample = super().__getitem__(index)
        return sample_from_bytes(sample["image"], int(sample["label"]), self.scenario, self.raw_bytes, self.check)


def main(argv: list[str]) -> int:
    spec = read_spec(argv, "LitData peer runner (see RUNNERS.md)", _T0)
    scenario = spec["scenario"]
    version = f"litdata {metadata.version('litdata')}, torch {torch.__version__}, pillow {metadata.version('pillow')}"
    base = result_base(spec, SYSTEM, version, SCENARIOS)
    if base is None:
        return 0
    batch_size, threads = spec["batch_size"], spec["threads"]
    raw_bytes = read_sidecar(spec["data"])["max_bytes"] if scenario == "raw" else 0
    dataset = JpegBytesDataset(spec["data"], scenario, spec["check"], raw_bytes)
    loader = StreamingDataLoader(dataset, batch_size=batch_size, num_workers=threads, pin_memory=True,
                                 persistent_workers=threads > 0, worker_init_fn=worker_init if threads > 0 else None)
    settings = {
        "data": spec["data"],
        "format": "litdata.optimize, chunk_bytes=64MB, {'image': file bytes (bytes serializer), 'label': int}",
        "dataset": "StreamingDataset(input_dir=local folder, shuffle=True, max_pre_download=2) subclass, "
                   "decode in __getitem__",
        "loader": f"StreamingDataLoader(batch_size={batch_size}, num_workers={threads}, pin_memory=True, "
                  f"persistent_workers={threads > 0})",
        **bytes_sample_settings(spec, raw_bytes),
    }

    run_classification(spec, base, settings, loader, unpack_views, close=lambda: shutdown_workers(loader))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
