"""The peers' check mode (benchmarks/peers/RUNNERS.md, "Check"): the
digest a runner reports equals the folder's own exactly when every image was
decoded once, from its original bytes; a dropped, repeated or re-encoded
image shows."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "peers"))

from peer_common import bytes_tag, classification_check, folder_digest  # noqa: E402


def _folder(tmp_path: Path, n: int = 5) -> list[Path]:
    paths = []
    for i in range(n):
        path = tmp_path / f"c{i % 2}_{i}.jpg"
        Image.new("RGB", (16 + i, 12), (40 * i, 20, 200)).save(path, quality=90)
        paths.append(path)
    return paths


def _loader(payloads: list[bytes], batch: int = 2):
    """Batches of (outputs, labels, tags) as a runner's unpacked batches."""
    return [([np.zeros((len(chunk), 3, 4, 4), np.float16)], np.zeros(len(chunk), np.int64),
             [bytes_tag(p) for p in chunk]) for chunk in (payloads[i:i + batch] for i in range(0, len(payloads), batch))]


def _check(payloads: list[bytes]) -> dict:
    return classification_check(_loader(payloads), lambda batch: batch, epochs=2)


def test_every_image_once_from_its_bytes_matches_the_folder(tmp_path):
    paths = _folder(tmp_path)
    expected = folder_digest(tmp_path)
    check = _check([p.read_bytes() for p in reversed(paths)])  # order does not matter
    assert expected["images"] == 5
    assert check["epoch_images"] == [5, 5] and check["epoch_distinct_images"] == [5, 5]
    assert check["epoch_bytes_digests"] == [expected["bytes_digest"]] * 2
    assert check["output_shapes"] == [[2, 3, 4, 4]] and check["output_dtypes"] == ["float16"]


def test_a_dropped_repeated_or_reencoded_image_changes_the_digest(tmp_path):
    paths = _folder(tmp_path)
    expected = folder_digest(tmp_path)["bytes_digest"]
    data = [p.read_bytes() for p in paths]
    reencoded = io.BytesIO()
    Image.open(paths[0]).save(reencoded, format="JPEG", quality=75)
    for payloads in (data[1:], data + data[:1], data[:4] + [data[0]], [reencoded.getvalue()] + data[1:]):
        assert _check(payloads)["epoch_bytes_digests"][0] != expected
