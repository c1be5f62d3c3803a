#!/usr/bin/env bash
# Create (or repair) the SPDL peer virtual environment at benchmarks/.venvs/spdl.
# Idempotent: re-running on a complete venv only verifies it (including that
# an image decodes through FFmpeg).
#
#   bash benchmarks/peers/install-spdl.sh
#
# Env overrides (and PYTHON, TORCH_WHEEL_DIR: see venv-lib.sh):
#   SPDL_VENV    venv path (default: <repo>/benchmarks/.venvs/spdl)

source "$(dirname "${BASH_SOURCE[0]}")/venv-lib.sh"
req="$peers/spdl-requirements.txt"

# 1. FFmpeg's shared libraries, which spdl_io loads at import (Debian bookworm: FFmpeg 5.1).
apt_require spdl libavutil57 libavcodec59 libavformat59 libavdevice59 libavfilter8 libswscale6 libswresample4

peer_venv spdl "$req" "${SPDL_VENV:-$repo/benchmarks/.venvs/spdl}"

check() {
    SPDL_PIN="$(pin spdl_io)" NUMPY_PIN="$(pin numpy)" "$py" - <<'PY' 2>/dev/null
import io, os
import numpy, torch
from importlib import metadata
from PIL import Image
import spdl.io
from spdl.pipeline import PipelineBuilder
assert torch.__version__.split("+")[0] == "2.13.0"
assert metadata.version("spdl_io") == os.environ["SPDL_PIN"]
assert numpy.__version__ == os.environ["NUMPY_PIN"]
jpeg = io.BytesIO()
Image.new("RGB", (64, 48), (200, 30, 10)).save(jpeg, format="JPEG")
frames = spdl.io.decode_packets(spdl.io.demux_image(jpeg.getvalue()), filter_desc="scale=32:24,format=rgb24")
assert spdl.io.to_numpy(spdl.io.convert_frames(frames)).shape == (24, 32, 3)
PY
}

# spdl and everything else, exactly pinned (torch is already satisfied).
finish_install "import/decode" "$req" -r "$req"
