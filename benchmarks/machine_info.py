"""What machine and Python a benchmark runs on, as one JSON line: cores and
processor, Python, torch and its CUDA, the GPU and its driver, NumPy,
Numba and the threading layer it picks, slipstream and its library.

Usage::

    python benchmarks/machine_info.py
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from typing import Any

import numba
import numpy
import torch

import slipstream
from slipstream import native


@numba.njit(parallel=True)
def _parallel_sum(n: int) -> int:
    total = 0
    for i in numba.prange(n):
        total += i
    return total


def processor() -> str | None:
    with open("/proc/cpuinfo") as fh:
        return next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), None)


def driver() -> str | None:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def describe() -> dict[str, Any]:
    """The machine and the versions, as a dict."""
    out: dict[str, Any] = {
        "python": platform.python_version(), "executable": sys.executable, "cores": os.cpu_count(),
        "cpu": processor(), "torch": torch.__version__, "torch_cuda": torch.version.cuda, "numpy": numpy.__version__,
        "numba": numba.__version__, "numba_threads": numba.config.NUMBA_NUM_THREADS,
        "slipstream": slipstream.__version__, "slipstream_path": slipstream.__file__,
        "libslipstream": native.version()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        out.update(gpu=props.name, gpus=torch.cuda.device_count(), gpu_memory_gib=round(props.total_memory / 2**30, 1),
                   multiprocessors=props.multi_processor_count, driver=driver())
    _parallel_sum(1000)  # Numba picks its threading layer at the first parallel launch
    out["threading_layer"] = numba.threading_layer()
    return out


if __name__ == "__main__":
    print(json.dumps(describe()))
