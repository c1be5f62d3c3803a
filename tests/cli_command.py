"""The installed ``slipstream`` command, run as a user runs it: the console
script that installing the package put next to the interpreter."""

from __future__ import annotations

import subprocess
import sysconfig
from pathlib import Path


def slipstream_command() -> str:
    """The path of the ``slipstream`` console script of the environment the
    tests run in."""
    path = Path(sysconfig.get_path("scripts")) / "slipstream"
    assert path.is_file(), (f"{path} does not exist: the tests run the installed `slipstream` command, so install "
                            f"the package into this environment (pip install .)")
    return str(path)


def run_slipstream(*args: str, cwd: str | Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``slipstream ARGS...`` in ``cwd``; its exit status and output."""
    return subprocess.run([slipstream_command(), *args], capture_output=True, text=True, cwd=cwd, timeout=timeout)
