"""The C test program of the native library, built with AddressSanitizer and
UndefinedBehaviorSanitizer and run here, so that every test run checks the
kernels for memory errors (``make asan`` also runs the Python tests against a
sanitized library)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_c_program_passes_under_sanitizers(tmp_path):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libjpeg"], check=True, capture_output=True,
                           text=True).stdout.split()
    exe = tmp_path / "test_native"
    sources = sorted(str(p) for p in (ROOT / "native" / "src").glob("*.c"))
    subprocess.run(
        [compiler, "-std=c11", "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
         "-fno-omit-frame-pointer", f"-I{ROOT / 'native' / 'include'}", *sources,
         str(ROOT / "native" / "tests" / "test_native.c"), *flags, "-lpthread", "-lm", "-o", str(exe)],
        check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600,
                         env={"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "PATH": "/usr/bin:/bin"})
    report = run.stdout + run.stderr
    assert "ERROR: AddressSanitizer" not in report and "runtime error:" not in report, report[-5000:]
    assert run.returncode == 0, report[-5000:]
    assert re.search(r"^\d+ passed, 0 failed$", report, re.M), report[-2000:]
