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

# 1. System packages (only when something is missing).
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

if check; then
    echo "install-ffcv: $venv already complete"
    exit 0
fi

# 3. torch first, from the local CPU wheel only (ffcv itself is built in step 4).
install_torch <(grep -v '^ffcv==' "$req")

# 4. Everything else, exactly pinned. ffcv builds its C extension here.
"$py" -m pip install --no-build-isolation -r "$req"

check || { echo "install-ffcv: import check failed" >&2; exit 1; }
echo "install-ffcv: ok ($venv)"
