"""Write a folder of JPEGs into a LitData optimized dataset with ``litdata.optimize``.

Run with the LitData peer interpreter (see ``install-litdata.sh``)::

    benchmarks/.venvs/litdata/bin/python benchmarks/peers/litdata_write.py FOLDER OUT_DIR

Each sample is ``{"image": <the file's bytes>, "label": <int>}``: a plain
``bytes`` leaf, which LitData's ``bytes`` serializer stores unchanged
(https://github.com/Lightning-AI/litData#serializers lists ``bytes`` among
the built-ins), so ``litdata_runner.py`` reads exactly the JPEG bytes of the
folder that the DataLoader peer reads.  LitData's ``Jpeg``/``Image``
wrappers would also keep a file's bytes, but they deserialize with
``torchvision.io``, which this environment cannot have (see
``litdata-requirements.txt``).  Samples and labels are those of
``peer_common.find_samples``; ``chunk_bytes="64MB"`` (LitData's documented
default, https://github.com/Lightning-AI/litData#speed-up-model-training) and
``num_workers`` = the CPU count.  The output is written to a temporary
folder beside ``OUT_DIR`` and renamed into place, so a broken run leaves no
half dataset behind.  Beside LitData's files, ``peer_common.SIDECAR`` records
the number of samples and the largest file's size (the ``raw`` scenario's
row width).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from litdata import optimize

from peer_common import find_samples, publish_dataset  # noqa: E402  (benchmarks/peers, next to this file)


def read_sample(item: tuple[str, int]) -> dict:
    """One sample: the file's bytes as they are on disk, and its label."""
    path, label = item
    with open(path, "rb") as fh:
        return {"image": fh.read(), "label": label}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder, out = Path(argv[0]), Path(argv[1]).resolve()
    samples = [(str(p), label) for p, label in find_samples(folder)]
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    optimize(fn=read_sample, inputs=samples, output_dir=str(partial), chunk_bytes="64MB",
             num_workers=os.cpu_count() or 1, mode="overwrite")
    # optimize() reports success even when its workers failed: count what reached the chunks.
    with open(partial / "index.json") as fh:
        written = sum(chunk["chunk_size"] for chunk in json.load(fh)["chunks"])
    if written != len(samples):
        raise SystemExit(f"litdata_write: {written} of {len(samples)} samples were written to {partial}")
    publish_dataset(partial, out, samples)
    print(f"litdata_write: {len(samples)} samples -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
