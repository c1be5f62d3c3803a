#!/usr/bin/env bash
# Create (or repair) the NVIDIA DALI (CPU-only) peer virtual environment at
# benchmarks/.venvs/dali. Idempotent: re-running on a complete venv only
# verifies it (including that a device_id=None pipeline runs).
#
#   bash benchmarks/peers/install-dali.sh
#
# Env overrides:
#   PYTHON            interpreter for the venv (default: pyenv 3.11.7, else python3.11)
#   DALI_VENV         venv path (default: <repo>/benchmarks/.venvs/dali)
#   TORCH_WHEEL_DIR   folder holding a torch 2.13.0 CPU wheel (default: /opt/wheels)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
req="$here/dali-requirements.txt"
venv="${DALI_VENV:-$repo/benchmarks/.venvs/dali}"
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
    DALI_PIN="$(pin nvidia-dali-cuda120)" NUMPY_PIN="$(pin numpy)" "$py" - <<'PY' 2>/dev/null
import os
import numpy, torch
import nvidia.dali as dali
from nvidia.dali import fn, pipeline_def, types
from nvidia.dali.plugin.pytorch import DALIGenericIterator
assert torch.__version__.split("+")[0] == "2.13.0"
assert dali.__version__ == os.environ["DALI_PIN"]
assert numpy.__version__ == os.environ["NUMPY_PIN"]

@pipeline_def(batch_size=2, num_threads=1, device_id=None)
def cpu_only():
    return fn.random.uniform(range=[0.0, 1.0], shape=[3])

p = cpu_only()
p.build()
(out,) = p.run()
assert len(out) == 2
PY
}

if check; then
    echo "install-dali: $venv already complete"
    exit 0
fi

# torch first, from the local CPU wheel file only; its pure-Python
# dependencies come from PyPI, pinned by the requirements file.
if ! "$py" -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "2.13.0")' 2>/dev/null; then
    wheel="$(ls "$wheels"/torch-2.13.0*.whl 2>/dev/null | head -n 1 || true)"
    if [[ -z "$wheel" ]]; then
        echo "install-dali: no torch-2.13.0 wheel in $wheels (set TORCH_WHEEL_DIR)." >&2
        echo "install-dali: install a CPU-only torch 2.13.0 into $venv yourself, then re-run." >&2
        exit 1
    fi
    "$py" -m pip install "$wheel" -c "$req"
fi

# DALI and everything else, exactly pinned (torch is already satisfied).
"$py" -m pip install -r "$req"

check || { echo "install-dali: import/CPU pipeline check failed" >&2; exit 1; }
echo "install-dali: ok ($venv)"
