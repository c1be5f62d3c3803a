#!/usr/bin/env bash
# Create (or repair) the PyTorch DataLoader + Pillow peer virtual environment at
# benchmarks/.venvs/dataloader. Idempotent: re-running on a complete venv only
# verifies it.
#
#   bash benchmarks/peers/install-dataloader.sh
#
# Env overrides (and PYTHON, TORCH_WHEEL_DIR: see venv-lib.sh):
#   DATALOADER_VENV   venv path (default: <repo>/benchmarks/.venvs/dataloader)

source "$(dirname "${BASH_SOURCE[0]}")/venv-lib.sh"
req="$peers/dataloader-requirements.txt"
peer_venv dataloader "$req" "${DATALOADER_VENV:-$repo/benchmarks/.venvs/dataloader}"

check() {
    NUMPY_PIN="$(pin numpy)" PILLOW_PIN="$(pin pillow)" "$py" - <<'PY' 2>/dev/null
import os, numpy, PIL, torch
from torch.utils.data import DataLoader
assert torch.__version__.split("+")[0] == "2.13.0"
assert numpy.__version__ == os.environ["NUMPY_PIN"]
assert PIL.__version__ == os.environ["PILLOW_PIN"]
PY
}

# Everything else, exactly pinned (torch is already satisfied).
finish_install "import" "$req" -r "$req"
