"""Write the committed seed corpora of the fuzz harnesses (native/fuzz/corpus).

Run from the repository root: ``python native/fuzz/make_seeds.py``.  The
seeds are small valid inputs of every kind the harnesses parse, so that
fuzzing starts from deep inside each format instead of rediscovering it.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

import hostile_corpus  # noqa: E402
from scan_bomb import progressive_scan_bomb  # noqa: E402
import slipstream as ss  # noqa: E402

CORPUS = ROOT / "native" / "fuzz" / "corpus"


def save(folder: Path, data: bytes) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)


def jpeg_seeds() -> list[bytes]:
    """The valid JPEGs of the hostile corpus under 4 KiB, a few of them coded
    again with Huffman tables optimized for them (the re-coding into tiles
    splices those), a few cut ones, and a small progressive JPEG of more
    scans than the scan limit allows."""
    items = hostile_corpus.corpus()
    valid = [item.data for item in items if item.decodes and len(item.data) <= 4096]
    cut = [item.data for item in items if "cut at byte" in item.name][::9]
    return valid + [optimized(data) for data in valid[::3]] + cut + [progressive_scan_bomb(64, 64, 150)]


def optimized(jpeg: bytes) -> bytes:
    """The JPEG's coefficients coded again by Pillow with optimized tables."""
    image = Image.open(io.BytesIO(jpeg))
    out = io.BytesIO()
    image.save(out, "JPEG", quality="keep", optimize=True, **({"subsampling": "keep"} if image.mode != "L" else {}))
    return out.getvalue()


def tiled_seeds() -> list[bytes]:
    """Valid JPEGs re-coded into restart-marker tiles, whose regions the
    kernels decode through a JPEG of the tiles they need."""
    items = [item.data for item in hostile_corpus.corpus() if item.decodes and len(item.data) <= 4096]
    return [ss.native.jpeg_add_restart_markers(data, width) for data in items for width in (8, 16)]


def dataset_seeds(folder: Path) -> list[bytes]:
    """Tiny dataset files: JPEG and raw images with every other field type,
    page checksums on, and an FFCV .beton from the test fixtures."""
    rng = np.random.default_rng(0)
    pictures = [hostile_corpus.jpeg_corpus.picture(12 + 4 * i, 16, seed=i) for i in range(3)]
    fields = {"image": ss.RGBImageField(), "label": ss.IntField(), "weight": ss.FloatField(),
              "mask": ss.NDArrayField(np.uint8, (2, 3)), "tag": ss.BytesField(), "meta": ss.JSONField()}
    rows = [(pictures[i], i, 0.5 * i, rng.integers(0, 9, (2, 3), dtype=np.uint8), b"x" * i, {"i": i})
            for i in range(3)]
    files = []
    for name, image, checksums in (("jpeg", ss.RGBImageField(), False), ("raw", ss.RGBImageField("raw"), True)):
        path = folder / f"{name}.slip"
        ss.write(path, rows, {**fields, "image": image}, page_size=4096, page_checksums=checksums, workers=0,
                 user_metadata={"classes": ["a", "b", "c"]}, verbose=False)
        files.append(path.read_bytes())
    files.append((ROOT / "tests" / "fixtures" / "ffcv" / "basic.beton").read_bytes())
    return files


def main() -> None:
    shutil.rmtree(CORPUS, ignore_errors=True)
    for data in jpeg_seeds():
        save(CORPUS / "jpeg_info", data)
        save(CORPUS / "decode_crop_resize", bytes([0, 0, 255, 255, 31, 47, 0, 0]) + data)
        save(CORPUS / "decode_crop_resize", bytes([64, 32, 128, 96, 7, 9, 5, 1]) + data)
    for data in tiled_seeds():
        save(CORPUS / "decode_crop_resize", bytes([64, 32, 128, 96, 7, 9, 5, 1]) + data)
        save(CORPUS / "decode_crop_resize", bytes([200, 150, 40, 90, 31, 47, 2, 0]) + data)
    with tempfile.TemporaryDirectory() as tmp:
        for data in dataset_seeds(Path(tmp)):
            save(CORPUS / "format", data)
            if data.startswith(b"SLIPSTRM"):
                save(CORPUS / "format", b"\0" + data)  # an even first byte: the harness fixes checksums
    for folder in sorted(CORPUS.iterdir()):
        files = list(folder.iterdir())
        print(f"{folder.relative_to(ROOT)}: {len(files)} seeds, {sum(f.stat().st_size for f in files):,} bytes")


if __name__ == "__main__":
    main()
