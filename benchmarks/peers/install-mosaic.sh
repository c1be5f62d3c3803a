#!/usr/bin/env bash
# Create (or repair) the MosaicML streaming peer virtual environment at
# benchmarks/.venvs/mosaic.  Idempotent: re-running on a complete venv only
# verifies it (including that JPEGs survive MDSWriter and StreamingDataset
# byte for byte).
#
#   bash benchmarks/peers/install-mosaic.sh
#
# Env overrides (and PYTHON, TORCH_WHEEL_DIR: see venv-lib.sh):
#   MOSAIC_VENV   venv path (default: <repo>/benchmarks/.venvs/mosaic)

source "$(dirname "${BASH_SOURCE[0]}")/venv-lib.sh"
req="$peers/mosaic-requirements.txt"
peer_venv mosaic "$req" "${MOSAIC_VENV:-$repo/benchmarks/.venvs/mosaic}"

# Three JPEGs through mosaic_write.py, read back through StreamingDataset.
check() {
    STREAMING_PIN="$(pin mosaicml-streaming)" NUMPY_PIN="$(pin numpy)" PYTHONPATH="$peers" "$py" - <<'PY' 2>/dev/null
import os, tempfile
from importlib import metadata
from pathlib import Path
import numpy, torch
from PIL import Image
from mosaic_runner import import_streaming
import mosaic_write
assert torch.__version__.split("+")[0] == "2.13.0"
assert metadata.version("mosaicml-streaming") == os.environ["STREAMING_PIN"]
assert numpy.__version__ == os.environ["NUMPY_PIN"]
streaming = import_streaming()
with tempfile.TemporaryDirectory() as tmp:
    images = Path(tmp) / "images"
    images.mkdir()
    for i in range(3):
        Image.new("RGB", (32, 24), (80 * i, 10, 10)).save(images / f"c{i}_{i}.jpg")
    assert mosaic_write.main([str(images), f"{tmp}/out"]) == 0
    dataset = streaming.StreamingDataset(local=f"{tmp}/out", remote=None)
    stored = sorted(bytes(dataset.get_item(i)["image"]) for i in range(3))
    assert stored == sorted(p.read_bytes() for p in images.iterdir())
PY
}

# mosaicml-streaming and its dependencies, exactly pinned, without pip's resolver: it would add torchvision.
finish_install "import/write" "$req" --no-deps -r "$req"
