"""Write a folder of JPEGs into a MosaicML streaming (MDS) dataset with ``MDSWriter``.

Run with the MosaicML streaming peer interpreter (see ``install-mosaic.sh``)::

    benchmarks/.venvs/mosaic/bin/python benchmarks/peers/mosaic_write.py FOLDER OUT_DIR

Columns ``{'image': 'bytes', 'label': 'int'}``, no compression, the default
shard size limit: each sample stores its file's bytes unchanged, so
``mosaic_runner.py`` reads exactly the JPEG bytes of the folder that the
DataLoader peer reads.  Streaming's own ImageNet converter
(https://github.com/mosaicml/streaming/blob/main/streaming/vision/convert/imagenet.py)
uses a ``jpeg`` column instead, which stores an opened JPEG file's bytes the
same way and decodes with ``PIL.Image.open`` on a ``BytesIO``; a ``bytes``
column gives the runner those bytes too, which its ``check`` hashes.
Samples and labels are those of ``peer_common.find_samples``.  The output
is written to a temporary folder beside ``OUT_DIR`` and renamed into
place; ``peer_common.SIDECAR`` records the sample count and largest file.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from mosaic_runner import import_streaming  # noqa: E402  (benchmarks/peers, next to this file)
from peer_common import find_samples, publish_dataset  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    streaming = import_streaming()
    folder, out = Path(argv[0]), Path(argv[1]).resolve()
    samples = [(str(p), label) for p, label in find_samples(folder)]
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with streaming.MDSWriter(out=str(partial), columns={"image": "bytes", "label": "int"}, compression=None) as writer:
        for path, label in samples:
            with open(path, "rb") as fh:
                writer.write({"image": fh.read(), "label": label})
    publish_dataset(partial, out, samples)
    print(f"mosaic_write: {len(samples)} samples -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
