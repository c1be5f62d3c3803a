"""slip_guard_mapping: pages of a mapped file lost to truncation read as
zeros and are counted, instead of killing the process with SIGBUS; any other
SIGBUS still ends the process as before, through the handler that was there
first."""

from __future__ import annotations

import mmap
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from slipstream import ArgumentError, native


def mapped_file(path, size: int) -> tuple[mmap.mmap, np.ndarray]:
    path.write_bytes(np.arange(size, dtype=np.uint32).astype(np.uint8).tobytes())
    with open(path, "rb") as f:
        mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return mapping, np.frombuffer(mapping, np.uint8)


def test_a_truncated_guarded_mapping_reads_zeros_and_counts(tmp_path):
    mapping, view = mapped_file(tmp_path / "f", 1 << 20)
    guard = native.guard_mapping(view)
    try:
        assert native.guard_faults(guard) == 0
        expected_head = view[:4096].copy()
        os.truncate(tmp_path / "f", 100_000)
        assert (view[:4096] == expected_head).all()  # pages still in the file are untouched
        assert int(view[500_000:600_000].sum()) == 0  # lost pages: zeros, not SIGBUS
        page = mmap.PAGESIZE
        lost = 599_999 // page - 500_000 // page + 1
        assert native.guard_faults(guard) == lost  # one fault per page touched
        assert int(view[-10:].sum()) == 0 and native.guard_faults(guard) == lost + 1
    finally:
        native.unguard_mapping(guard)
        del view
        mapping.close()
    with pytest.raises(ArgumentError):
        native.guard_faults(guard)  # no longer guarded
    with pytest.raises(ArgumentError):
        native.unguard_mapping(guard)


def test_guards_are_independent(tmp_path):
    maps = [mapped_file(tmp_path / f"f{k}", 65536) for k in range(3)]
    guards = [native.guard_mapping(view) for _, view in maps]
    assert len(set(guards)) == 3
    os.truncate(tmp_path / "f1", 0)
    assert int(maps[1][1][:100].sum()) == 0 and int(maps[0][1][:100].sum()) > 0
    assert [native.guard_faults(g) for g in guards] == [0, 1, 0]
    for guard in guards:
        native.unguard_mapping(guard)


def run(script: str, tmp_path, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env={**os.environ, **env})


UNGUARDED = """
    import mmap, os
    from pathlib import Path
    from slipstream import native
    Path("g").write_bytes(bytes(65536)); Path("u").write_bytes(bytes(65536))
    guarded = mmap.mmap(os.open("g", os.O_RDONLY), 0, access=mmap.ACCESS_READ)
    native.guard_mapping(guarded)
    os.truncate("g", 0)
    print("guarded page read", guarded[40000], flush=True)
    plain = mmap.mmap(os.open("u", os.O_RDONLY), 0, access=mmap.ACCESS_READ)
    os.truncate("u", 0)
    print("unguarded page read", plain[40000], flush=True)
"""


def ended_by_sigbus(done: subprocess.CompletedProcess) -> bool:
    """The process ended as SIGBUS ends it: killed by the signal, or (under
    ``make asan``) by AddressSanitizer's report, whose handler was there first."""
    return done.returncode == -signal.SIGBUS or (done.returncode != 0 and "AddressSanitizer: BUS" in done.stderr)


def test_a_sigbus_outside_the_guards_still_ends_the_process(tmp_path):
    done = run(UNGUARDED, tmp_path)
    assert ended_by_sigbus(done), done.stderr
    assert done.stdout == "guarded page read 0\n"


def test_a_sigbus_outside_the_guards_reaches_the_handler_installed_before(tmp_path):
    done = run(UNGUARDED, tmp_path, PYTHONFAULTHANDLER="1")
    assert ended_by_sigbus(done), done.stderr
    assert "Fatal Python error: Bus error" in done.stderr and 'File "<string>", line 12' in done.stderr  # faulthandler's traceback


def test_a_sigbus_sent_by_kill_still_ends_the_process(tmp_path):
    done = run("""
        import os, signal, mmap
        from slipstream import native
        native.guard_mapping(mmap.mmap(-1, 4096))
        os.kill(os.getpid(), signal.SIGBUS)
        print("survived")
    """, tmp_path)
    assert ended_by_sigbus(done) and "survived" not in done.stdout
