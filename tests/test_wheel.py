"""The self-contained wheel of `make wheel`: its tags, its contents, and a
library that needs nothing from the machine but glibc and exports nothing but
the ABI.  Checks the wheel named by $SLIPSTREAM_WHEEL (CI sets it after `make
wheel`; then it must exist), else the one in dist/, else skips."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from slipstream import _native

ROOT = Path(__file__).resolve().parent.parent
PLATFORM = "manylinux_2_17_x86_64"
GLIBC = (2, 17)
# What the loader finds on every Linux with glibc: the C library, split in three before glibc 2.34, and the loader.
SYSTEM_LIBRARIES = {"libc.so.6", "libm.so.6", "libpthread.so.0", "ld-linux-x86-64.so.2"}


def find_wheel() -> Path:
    named = os.environ.get("SLIPSTREAM_WHEEL")
    if named:
        assert Path(named).is_file(), f"SLIPSTREAM_WHEEL={named} does not exist"
        return Path(named)
    wheels = sorted((ROOT / "dist").glob("slipstream-*.whl"))
    if not wheels:
        pytest.skip("no wheel in dist/ (`make wheel` builds one)")
    return wheels[-1]


@pytest.fixture(scope="module")
def wheel() -> Path:
    return find_wheel()


@pytest.fixture(scope="module")
def library(wheel, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wheel")
    with zipfile.ZipFile(wheel) as archive:
        archive.extract("slipstream/libslipstream.so", folder)
    return folder / "slipstream" / "libslipstream.so"


def binutils(tool: str, *args: str) -> str:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} (binutils) is not installed")
    return subprocess.run([tool, *args], check=True, capture_output=True, text=True).stdout


def test_the_wheel_is_tagged_for_every_python_and_manylinux(wheel):
    assert wheel.name.endswith(".whl") and "-py3-none-" in wheel.name and PLATFORM in wheel.name
    with zipfile.ZipFile(wheel) as archive:
        info = next(name for name in archive.namelist() if name.endswith(".dist-info/WHEEL"))
        tags = re.findall(r"^Tag: (\S+)$", archive.read(info).decode(), re.MULTILINE)
    assert f"py3-none-{PLATFORM}" in tags
    assert all(tag.startswith("py3-none-manylinux") for tag in tags), tags


def test_the_wheel_holds_one_library_and_vendors_nothing(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    native = [name for name in names if re.search(r"\.so(\.|$)", name)]
    assert native == ["slipstream/libslipstream.so"]
    assert not [name for name in names if ".libs/" in name], "auditwheel vendored a library"
    assert "slipstream/_native.py" in names


def test_the_library_needs_only_the_c_library(library):
    dynamic = binutils("readelf", "--dynamic", "--wide", str(library))
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic))
    assert needed and needed <= SYSTEM_LIBRARIES, needed - SYSTEM_LIBRARIES
    assert "RPATH" not in dynamic and "RUNPATH" not in dynamic


def test_the_library_can_be_loaded_late_by_any_glibc(library):
    # An executable stack (an assembly object without .note.GNU-stack) makes
    # glibc 2.41+ refuse to load the library; initial-exec thread-locals
    # (STATIC_TLS, libjpeg-turbo keeps its SIMD flags per thread) can fail to
    # load into a process that has already started, as a ctypes load is.
    segments = binutils("readelf", "--program-headers", "--wide", str(library))
    stack = re.search(r"^\s*GNU_STACK\s+(?:0x[0-9a-f]+\s+){5}([RWE ]+?)\s+(?:0x)?[0-9a-f]+$", segments, re.MULTILINE)
    assert stack and "E" not in stack[1], segments
    assert "STATIC_TLS" not in binutils("readelf", "--dynamic", "--wide", str(library))


def test_the_library_asks_for_no_newer_glibc_than_its_tag(library):
    versions = set(re.findall(r"\bGLIBC_([0-9.]+)", binutils("objdump", "-T", str(library))))
    assert versions
    newest = max(tuple(int(part) for part in version.split(".")) for version in versions)
    assert newest <= GLIBC, f"the library needs glibc {newest}, its tag promises {GLIBC}"


def test_the_library_exports_the_abi_and_not_libjpeg(library):
    symbols = binutils("nm", "--dynamic", "--defined-only", str(library))
    exported = {line.split()[-1] for line in symbols.splitlines() if line.strip()}
    assert exported == set(_native.FUNCTIONS)
    undefined = binutils("nm", "--dynamic", "--undefined-only", str(library))
    assert not re.search(r"\bj(peg|simd)_", symbols + undefined), "libjpeg's symbols are visible"


def test_the_library_carries_libjpeg_turbos_simd_code(library):
    # The x86-64 SIMD dispatcher of libjpeg-turbo reads these variables when it
    # picks SSE2 or AVX2 code; a build without SIMD has a dispatcher that
    # reads none (the library's symbols are stripped, so its strings tell).
    data = library.read_bytes()
    assert b"JSIMD_FORCEAVX2" in data and b"JSIMD_FORCESSE2" in data


def test_the_library_loads_and_has_this_abi(library):
    loaded = ctypes.CDLL(str(library))
    loaded.slip_abi_version.restype = ctypes.c_int32
    assert loaded.slip_abi_version() == _native.ABI_VERSION


def test_auditwheel_finds_the_wheel_consistent_with_its_tag(wheel):
    auditwheel = ROOT / "build" / "wheel" / "tools" / "bin" / "auditwheel"
    if not auditwheel.exists():
        pytest.skip("auditwheel is installed by `make wheel`")
    report = subprocess.run([str(auditwheel), "show", str(wheel)], check=True, capture_output=True, text=True).stdout
    consistent = re.search(r'consistent with the following platform tag:\s*"manylinux_(\d+)_(\d+)_x86_64"', report)
    assert consistent, report
    assert (int(consistent[1]), int(consistent[2])) <= GLIBC, report
