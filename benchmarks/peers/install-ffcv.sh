#!/usr/bin/env bash
# Create (or repair) the FFCV peer virtual environment at benchmarks/.venvs/ffcv.
# Idempotent: re-running on a complete venv only verifies it.
#
#   bash benchmarks/peers/install-ffcv.sh
#
# Env overrides (and PYTHON, TORCH_WHEEL_DIR: see venv-lib.sh):
#   FFCV_VENV    venv path (default: <repo>/benchmarks/.venvs/ffcv)

source "$(dirname "${BASH_SOURCE[0]}")/venv-lib.sh"
req="$peers/ffcv-requirements.txt"

# System packages (only when something is missing).
apt_require ffcv libopencv-dev libturbojpeg0-dev pkg-config g++

peer_venv ffcv "$req" "${FFCV_VENV:-$repo/benchmarks/.venvs/ffcv}"

check() {
    "$py" - <<'PY' 2>/dev/null
import numpy, numba, torch, cv2, PIL
from ffcv.writer import DatasetWriter
from ffcv.reader import Reader
from ffcv.loader import Loader, OrderOption
from ffcv.fields import IntField, FloatField, NDArrayField, BytesField, JSONField, RGBImageField
assert numpy.__version__ == "1.26.4" and numba.__version__ == "0.59.1"
assert torch.__version__.split("+")[0] == "2.13.0"
PY
}

# torch first, from the local CPU wheel only, then everything else, exactly pinned: ffcv builds its C
# extension against that torch, without build isolation.
finish_install "import" <(grep -v '^ffcv==' "$req") --no-build-isolation -r "$req"
