#!/usr/bin/env bash
# Create (or repair) the PyTorch DataLoader + Pillow peer virtual environment at
# benchmarks/.venvs/dataloader. Idempotent: re-running on a complete venv only
# verifies it.
#
#   bash benchmarks/peers/install-dataloader.sh
#
# Env overrides:
#   PYTHON            interpreter for the venv (default: pyenv 3.11.7, else python3.11)
#   DATALOADER_VENV   venv path (default: <repo>/benchmarks/.venvs/dataloader)
#   TORCH_WHEEL_DIR   folder holding a torch 2.13.0 CPU wheel (default: /opt/wheels)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
req="$here/dataloader-requirements.txt"
venv="${DATALOADER_VENV:-$repo/benchmarks/.venvs/dataloader}"
wheels="${TORCH_WHEEL_DIR:-/opt/wheels}"
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x /root/.pyenv/versions/3.11.7/bin/python3.11 ]]; then
        PYTHON=/root/.pyenv/versions/3.11.7/bin/python3.11
    else
        PYTHON="$(command -v python3.11)"
    fi
fi

pin() { sed -n "s/^$1==\([^[:space:]]*\).*/\1/p" "$req"; }

if [[ ! -x "$venv/bin/python" ]]; then
    "$PYTHON" -m venv "$venv"
fi
py="$venv/bin/python"

check() {
    NUMPY_PIN="$(pin numpy)" PILLOW_PIN="$(pin pillow)" "$py" - <<'PY' 2>/dev/null
import os, numpy, PIL, torch
from torch.utils.data import DataLoader
assert torch.__version__.split("+")[0] == "2.13.0"
assert numpy.__version__ == os.environ["NUMPY_PIN"]
assert PIL.__version__ == os.environ["PILLOW_PIN"]
PY
}

if check; then
    echo "install-dataloader: $venv already complete"
    exit 0
fi

# torch first, from the local CPU wheel file only; its pure-Python
# dependencies come from PyPI, pinned by the requirements file.
if ! "$py" -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "2.13.0")' 2>/dev/null; then
    wheel="$(ls "$wheels"/torch-2.13.0*.whl 2>/dev/null | head -n 1 || true)"
    if [[ -z "$wheel" ]]; then
        echo "install-dataloader: no torch-2.13.0 wheel in $wheels (set TORCH_WHEEL_DIR)." >&2
        echo "install-dataloader: install a CPU-only torch 2.13.0 into $venv yourself, then re-run." >&2
        exit 1
    fi
    "$py" -m pip install "$wheel" -c "$req"
fi

# Everything else, exactly pinned (torch is already satisfied).
"$py" -m pip install -r "$req"

check || { echo "install-dataloader: import check failed" >&2; exit 1; }
echo "install-dataloader: ok ($venv)"
