"""Write a folder of JPEGs into an FFCV ``.beton`` with FFCV's own DatasetWriter.

Run with the FFCV peer interpreter (see ``install-ffcv.sh``)::

    benchmarks/.venvs/ffcv/bin/python benchmarks/peers/ffcv_write.py FOLDER OUT.beton [--bytes | --long-side N]

Fields: ``image`` = ``RGBImageField(write_mode='jpg', jpeg_quality=90)`` (FFCV
decodes every JPEG and re-encodes it at quality 90 with OpenCV, so every
system that later reads this file reads the same JPEG bytes) and ``label`` =
``IntField``.  With ``--bytes`` the ``image`` field is instead a
``BytesField`` holding each file's bytes unchanged: the file both FFCV
(``BytesDecoder``) and slipstream read in the raw-bytes scenario, since
FFCV's decoders for an ``RGBImageField`` all decode to pixels.  With
``--long-side N`` each photo is first resized with Pillow (Lanczos) so that
its longer side is N pixels (up or down), then handed to the same
``RGBImageField``: the photos at a larger size, encoded once, by FFCV's
writer, at quality 90.  Samples are the folder's ``*.jpg``/``*.jpeg`` files (any case,
the folder itself or one level of class sub-folders) in sorted path order;
the label is the index of the class in the sorted list of distinct classes,
where the class is the sub-folder name or, for a flat folder, the file-name
prefix before the first underscore (``n01443537_goldfish.JPEG`` ->
``n01443537``).  ``num_workers`` = the CPU count, default page size.

The sample order (indices) is deterministic; where each sample's bytes land
in the file can differ between runs because FFCV's writer workers allocate
pages concurrently.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

from peer_common import find_samples  # noqa: E402  (benchmarks/peers, next to this file)




class JpegFolder:
    """Indexed dataset for ``DatasetWriter.from_indexed_dataset``: decoded
    pixels, or with ``as_bytes`` the files' bytes as uint8 arrays."""

    def __init__(self, samples: list[tuple[Path, int]], as_bytes: bool = False, long_side: int | None = None):
        self.samples = samples
        self.as_bytes = as_bytes
        self.long_side = long_side

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int):
        path, label = self.samples[i]
        if self.as_bytes:
            return np.fromfile(path, dtype=np.uint8), label
        with Image.open(path) as im:
            img = im.convert("RGB")
        if self.long_side is not None:
            scale = self.long_side / max(img.size)
            size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
            img = img.resize(size, Image.Resampling.LANCZOS)
        return np.asarray(img), label


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("out", type=Path)
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--bytes", action="store_true", help="store each file's bytes unchanged (BytesField)")
    how.add_argument("--long-side", type=int, default=None, help="resize each photo to this longer side first")
    args = parser.parse_args(argv)
    folder, out, as_bytes = args.folder, args.out, args.bytes

    from ffcv.fields import BytesField, IntField, RGBImageField
    from ffcv.writer import DatasetWriter

    samples = find_samples(folder)
    out.parent.mkdir(parents=True, exist_ok=True)
    workers = os.cpu_count() or 1
    writer = DatasetWriter(
        str(out),
        {"image": BytesField() if as_bytes else RGBImageField(write_mode="jpg", jpeg_quality=90), "label": IntField()},
        num_workers=workers,
    )
    start = time.perf_counter()
    writer.from_indexed_dataset(JpegFolder(samples, as_bytes, args.long_side))
    took = time.perf_counter() - start
    classes = len({label for _, label in samples})
    print(
        f"ffcv_write: {len(samples)} images, {classes} classes -> {out} "
        f"({out.stat().st_size / 2**20:.1f} MiB, {workers} workers, {took:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
