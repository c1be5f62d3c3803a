#!/usr/bin/env bash
# Create (or repair) the NVIDIA DALI (CPU-only) peer virtual environment at
# benchmarks/.venvs/dali. Idempotent: re-running on a complete venv only
# verifies it (including that a device_id=None pipeline runs).
#
#   bash benchmarks/peers/install-dali.sh
#
# Env overrides (and PYTHON, TORCH_WHEEL_DIR: see venv-lib.sh):
#   DALI_VENV         venv path (default: <repo>/benchmarks/.venvs/dali)

source "$(dirname "${BASH_SOURCE[0]}")/venv-lib.sh"
req="$peers/dali-requirements.txt"
peer_venv dali "$req" "${DALI_VENV:-$repo/benchmarks/.venvs/dali}"

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

# DALI and everything else, exactly pinned (torch is already satisfied).
finish_install "import/CPU pipeline" "$req" -r "$req"
