"""slip_range_*: a reserved address range whose places are mapped to files,
to memory or to zeros and given back, under one SIGBUS guard
(slipstream.format.address_range.AddressRange over the native functions)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from slipstream import ArgumentError, NativeIOError, native
from slipstream.format.address_range import OS_PAGE, AddressRange, os_pages


def write(path, data: np.ndarray) -> int:
    path.write_bytes(data.tobytes())
    return os.open(path, os.O_RDONLY)


def test_files_mapped_at_their_places_read_in_place(tmp_path):
    rng = np.random.default_rng(0)
    first, second = (rng.integers(0, 256, n, dtype=np.uint8) for n in (3 * OS_PAGE + 100, 2 * OS_PAGE))
    space = AddressRange(10 * OS_PAGE)
    a, b = write(tmp_path / "a", first), write(tmp_path / "b", second)
    try:
        space.map_file(0, first.size, a, 0)
        space.map_file(6 * OS_PAGE, OS_PAGE, b, OS_PAGE, populate=True)  # b's second page only
    finally:
        os.close(a)
        os.close(b)
    storage = space.storage
    assert storage.size == space.length == 10 * OS_PAGE
    assert (storage[: first.size] == first).all()
    assert not storage[first.size: os_pages(first.size)].any()  # the rest of the file's last OS page
    assert (storage[6 * OS_PAGE: 7 * OS_PAGE] == second[OS_PAGE:]).all()
    (tmp_path / "a").unlink()  # a mapping holds its file
    assert (storage[: first.size] == first).all()


def test_fill_zeros_and_release(tmp_path):
    data = np.arange(3 * OS_PAGE, dtype=np.uint32).astype(np.uint8)
    fd = write(tmp_path / "f", data)
    space = AddressRange(4 * OS_PAGE)
    try:
        view = space.fill(OS_PAGE, 2 * OS_PAGE - 7, fd, 5)  # any file offset: the bytes are read, not mapped
    finally:
        os.close(fd)
    assert (view == data[5: 5 + 2 * OS_PAGE - 7]).all()
    assert (space.storage[OS_PAGE: 3 * OS_PAGE - 7] == view).all()
    space.map_zeros(OS_PAGE, OS_PAGE)
    assert not space.storage[OS_PAGE: 2 * OS_PAGE].any()
    assert (space.storage[2 * OS_PAGE: 3 * OS_PAGE - 7] == view[OS_PAGE:]).all()
    space.release(OS_PAGE, 2 * OS_PAGE)
    space.fill(OS_PAGE, 10, os.open(tmp_path / "f", os.O_RDONLY), 0)  # the place can be mapped again
    assert (space.storage[OS_PAGE: OS_PAGE + 10] == data[:10]).all()


def test_a_file_truncated_under_its_place_reads_zeros_and_counts(tmp_path):
    data = np.full(4 * OS_PAGE, 7, np.uint8)
    fd = write(tmp_path / "f", data)
    space = AddressRange(8 * OS_PAGE)
    space.map_file(2 * OS_PAGE, data.size, fd, 0)
    os.close(fd)
    assert space.faults() == 0
    os.truncate(tmp_path / "f", OS_PAGE)
    assert (space.storage[2 * OS_PAGE: 3 * OS_PAGE] == 7).all()
    assert not space.storage[3 * OS_PAGE: 6 * OS_PAGE].any()  # lost pages: zeros, not SIGBUS
    assert space.faults() == 3


def test_a_released_place_is_unreadable(tmp_path):
    # A stager that read a page it had released would get a loud SIGSEGV, not stale bytes.
    code = textwrap.dedent(f"""
        from slipstream.format.address_range import AddressRange
        space = AddressRange(2 * {OS_PAGE})
        space.map_zeros(0, {OS_PAGE})
        assert int(space.storage[:{OS_PAGE}].sum()) == 0
        space.release(0, {OS_PAGE})
        print(int(space.storage[0]), flush=True)
    """)
    # Run from elsewhere: in the source tree, Python would import it instead of the installed package.
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == -11, done.stderr[-2000:]  # SIGSEGV
    assert done.stdout == ""


def test_places_must_be_whole_os_pages(tmp_path):
    space = AddressRange(4 * OS_PAGE)
    fd = write(tmp_path / "f", np.zeros(2 * OS_PAGE, np.uint8))
    try:
        with pytest.raises(ValueError, match="not a place"):
            space.map_file(100, OS_PAGE, fd, 0)
        with pytest.raises(ValueError, match="not a place"):
            space.map_zeros(3 * OS_PAGE, 2 * OS_PAGE)  # past the end
        with pytest.raises(ArgumentError, match="file offset 100 must be"):
            space.map_file(0, OS_PAGE, fd, 100)
        with pytest.raises(NativeIOError, match="mapping a file"):
            space.map_file(0, OS_PAGE, 987654, 0)  # not an open file
    finally:
        os.close(fd)
    base = native.range_reserve(OS_PAGE)
    with pytest.raises(ArgumentError, match="multiples of the OS page size"):
        native.range_map_memory(base + 1, OS_PAGE, True)
    with pytest.raises(ArgumentError, match="non-zero multiple"):
        native.range_reserve(OS_PAGE + 1)
    native.range_free(base, OS_PAGE)


def test_the_range_outlives_its_owner_while_an_array_reads_it():
    space = AddressRange(OS_PAGE)
    space.map_zeros(0, OS_PAGE)
    view = space.storage[10:20]
    del space
    gc.collect()
    assert not view.any()  # still mapped: the array keeps the reservation
