#!/usr/bin/env bash
# Create (or repair) the video peers' virtual environment at
# benchmarks/.venvs/video: torch 2.13.0 (CPU), PyAV and torchcodec.
# Idempotent: re-running on a complete venv only verifies it.
#
#   bash benchmarks/peers/install-video.sh
#
# Env overrides (and PYTHON, TORCH_WHEEL_DIR: see venv-lib.sh):
#   VIDEO_VENV   venv path (default: <repo>/benchmarks/.venvs/video)

source "$(dirname "${BASH_SOURCE[0]}")/venv-lib.sh"
req="$peers/video-requirements.txt"
peer_venv video "$req" "${VIDEO_VENV:-$repo/benchmarks/.venvs/video}"
# torchcodec loads FFmpeg's shared libraries from the system; PyAV's wheel carries its own.
apt_require video libavcodec59 libavformat59 libavutil57 libswscale6

check() {
    AV_PIN="$(pin av)" TORCHCODEC_PIN="$(pin torchcodec)" "$py" - <<'PY' 2>/dev/null
import os, av, torch, torchcodec
from torchcodec.decoders import VideoDecoder
assert torch.__version__.split("+")[0] == "2.13.0"
assert av.__version__ == os.environ["AV_PIN"]
assert torchcodec.__version__.split("+")[0] == os.environ["TORCHCODEC_PIN"]
PY
}

finish_install "import" "$req" -r "$req"
