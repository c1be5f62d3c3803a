#!/usr/bin/env bash
# Create (or repair) the LitData peer virtual environment at benchmarks/.venvs/litdata.
# Idempotent: re-running on a complete venv only verifies it (including that
# a sample survives litdata.optimize and StreamingDataset byte for byte).
#
#   bash benchmarks/peers/install-litdata.sh
#
# Env overrides (and PYTHON, TORCH_WHEEL_DIR: see venv-lib.sh):
#   LITDATA_VENV   venv path (default: <repo>/benchmarks/.venvs/litdata)

source "$(dirname "${BASH_SOURCE[0]}")/venv-lib.sh"
req="$peers/litdata-requirements.txt"
peer_venv litdata "$req" "${LITDATA_VENV:-$repo/benchmarks/.venvs/litdata}"

# The check writes three JPEGs with litdata_write.py (litdata.optimize runs its
# workers with the spawn start method, so the writer must be a file, not stdin)
# and reads them back byte for byte through StreamingDataset.
check() {
    local tmp rc=0
    tmp="$(mktemp -d)"
    LITDATA_PIN="$(pin litdata)" NUMPY_PIN="$(pin numpy)" "$py" - "$tmp" <<'PY' 2>/dev/null || rc=1
import os, sys
from pathlib import Path
import numpy, torch, litdata
from PIL import Image
assert torch.__version__.split("+")[0] == "2.13.0"
assert litdata.__version__ == os.environ["LITDATA_PIN"]
assert numpy.__version__ == os.environ["NUMPY_PIN"]
images = Path(sys.argv[1]) / "images"
images.mkdir()
for i in range(3):
    Image.new("RGB", (32, 24), (80 * i, 10, 10)).save(images / f"c{i}_{i}.jpg")
PY
    if ((rc == 0)); then
        "$py" "$peers/litdata_write.py" "$tmp/images" "$tmp/out" >/dev/null 2>&1 || rc=1
    fi
    if ((rc == 0)); then
        PYTHONPATH="$peers" "$py" - "$tmp" <<'PY' 2>/dev/null || rc=1
import sys
from pathlib import Path
from litdata import StreamingDataset
tmp = Path(sys.argv[1])
stored = sorted(bytes(StreamingDataset(str(tmp / "out"))[i]["image"]) for i in range(3))
assert stored == sorted(p.read_bytes() for p in (tmp / "images").iterdir())
PY
    fi
    rm -rf "$tmp"
    return $rc
}

# litdata and its dependencies, exactly pinned, without pip's resolver: it would add torchvision.
finish_install "import/optimize" "$req" --no-deps -r "$req"
