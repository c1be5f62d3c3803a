"""Progress bars: shown on a terminal for writing a dataset and for the first
(compiling) batch of a loader, silent when output goes to a pipe or a file,
and silent on a terminal with ``verbose=False``."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import termios
import subprocess
import sys

import pytest

SCRIPT = """
import sys
import slipstream as ss
from slipstream.ops import presets
from slipstream.sources import synthetic_folder

verbose = sys.argv[1] == "1"
folder = synthetic_folder(sys.argv[2] + "/images", count=12, height=96, width=128, verbose=verbose)
ss.write(sys.argv[2] + "/d.slip", ss.sources.ImageFolder(folder), verbose=verbose)
with ss.Loader(sys.argv[2] + "/d.slip", 4, presets.imagenet_train(64), verbose=verbose) as loader:
    next(iter(loader))
print("done")
"""


def _run(tmp_path, verbose: bool, terminal: bool) -> str:
    """Everything the script writes to stdout and stderr."""
    cache = tmp_path / f"cache-{verbose}-{terminal}"  # cold: compiles
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(cache), "SLIPSTREAM_COMPILE_CACHE_DIR": str(cache / "stages")}
    args = [sys.executable, "-c", SCRIPT, "1" if verbose else "0", str(tmp_path)]
    if not terminal:
        proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout + proc.stderr
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))  # a 160-column terminal
    proc = subprocess.Popen(args, stdout=follower, stderr=follower, env=env, cwd=tmp_path)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal is closed once the process has exited
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=600) == 0, b"".join(chunks)[-2000:]
    return b"".join(chunks).decode(errors="replace")


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    runs = {}
    for verbose, terminal in ((True, True), (True, False), (False, True)):
        folder = tmp_path_factory.mktemp(f"progress-{verbose}-{terminal}")
        runs[verbose, terminal] = _run(folder, verbose, terminal)
    return runs


def test_a_terminal_shows_writing_and_compiling(outputs):
    shown = outputs[True, True]
    assert "done" in shown
    assert "generating images" in shown and "writing d.slip" in shown
    assert "compiling pipeline stages" in shown


def test_a_pipe_shows_no_bars(outputs):
    assert outputs[True, False].strip() == "done"


def test_verbose_false_shows_no_bars_on_a_terminal(outputs):
    assert outputs[False, True].strip() == "done"
