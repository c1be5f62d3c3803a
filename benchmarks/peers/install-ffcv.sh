#!/usr/bin/env bash
# Create (or repair) the FFCV peer virtual environment at benchmarks/.venvs/ffcv.
# Idempotent: re-running on a complete venv only verifies it.
#
#   bash benchmarks/peers/install-ffcv.sh
#
# Env overrides:
#   PYTHON       interpreter for the venv (default: pyenv 3.11.7, else python3.11)
#   FFCV_VENV    venv path (default: <repo>/benchmarks/.venvs/ffcv)
#   TORCH_WHEEL_DIR  folder holding a torch 2.13.0 CPU wheel (default: /opt/wheels)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
req="$here/ffcv-requirements.txt"
venv="${FFCV_VENV:-$repo/benchmarks/.venvs/ffcv}"
wheels="${TORCH_WHEEL_DIR:-/opt/wheels}"
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x /root/.pyenv/versions/3.11.7/bin/python3.11 ]]; then
        PYTHON=/root/.pyenv/versions/3.11.7/bin/python3.11
    else
        PYTHON="$(command -v python3.11)"
    fi
fi

# 1. System packages (only when something is missing).
apt_pkgs=(libopencv-dev libturbojpeg0-dev pkg-config g++)
missing=()
for p in "${apt_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "install-ffcv: apt-get install ${missing[*]}"
    sudo_cmd=""
    [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi

# 2. The venv.
if [[ ! -x "$venv/bin/python" ]]; then
    "$PYTHON" -m venv "$venv"
fi
py="$venv/bin/python"

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

# 3. torch first, from a local CPU wheel only: never let pip pick torch (or its
#    CUDA dependencies) from PyPI.
if ! "$py" -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "2.13.0")' 2>/dev/null; then
    if ! ls "$wheels"/torch-2.13.0*.whl >/dev/null 2>&1; then
        echo "install-ffcv: no torch-2.13.0 wheel in $wheels (set TORCH_WHEEL_DIR)." >&2
        echo "install-ffcv: install a CPU-only torch 2.13.0 into $venv yourself, then re-run." >&2
        exit 1
    fi
    # Its pure-Python dependencies come from PyPI, pinned below.
    "$py" -m pip install --find-links "$wheels" "torch==2.13.0" \
        -c <(grep -v '^ffcv==' "$req")
fi

# 4. Everything else, exactly pinned. ffcv builds its C extension here.
"$py" -m pip install --no-build-isolation -r "$req"

check || { echo "install-ffcv: import check failed" >&2; exit 1; }
echo "install-ffcv: ok ($venv)"
