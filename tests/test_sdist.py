"""The sdist holds the sources the build needs and nothing else, whatever the
working tree holds: no virtual environment, build output, peer virtualenv or
stray file, even in folders named like the ones it ships (``native``,
``codegen``).  Builds sdists with scikit-build-core's own hook (the test extra
installs it), and checks the one named by $SLIPSTREAM_SDIST (CI sets it after
`make wheel`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What building the wheel reads (and codegen/, the generator of slipstream/_native.py): files or folders.
BUILD_NEEDS = ("pyproject.toml", "CMakeLists.txt", "README.md", "LICENSE", "native/include/", "native/src/",
               "codegen/", "slipstream/")
# Written by the build backend, not taken from the tree.
GENERATED = {"PKG-INFO"}
# Files a working checkout can hold that no sdist may: git-ignored output and environments, some in folders
# named like shipped ones, and one file that is neither tracked nor ignored.
JUNK = ("build/native/src/extra.c", "build/py3-none-linux_x86_64/native/CMakeFiles/slipstream.dir/io.c.o",
        ".venv/lib/python3.11/site-packages/torch/include/native/junk.h",
        "benchmarks/.venvs/ffcv/lib/python3.11/site-packages/codegen/junk.py", "dist/slipstream-0.0.0.tar.gz",
        "slipstream/__pycache__/junk.cpython-311.pyc", "slipstream/libslipstream.so",
        "slipstream.egg-info/PKG-INFO", "native/tests/corpus-out/junk.jpg", "notes.txt")


def tracked(root: Path) -> set[str]:
    """The files git tracks in ``root`` that exist in the working tree."""
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip(f"{root} is not a git checkout")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, check=True, capture_output=True).stdout
    return {name for name in listed.decode().split("\0") if name and (root / name).is_file()}


def needed(files: set[str]) -> set[str]:
    """The files of ``files`` that the build needs."""
    return {name for name in files if any(name == need or (need.endswith("/") and name.startswith(need))
                                          for need in BUILD_NEEDS)}


def build_sdist(project: Path, out: Path) -> Path:
    """The sdist of ``project``, written by scikit-build-core's PEP 517 hook run in ``project``."""
    pytest.importorskip("scikit_build_core", reason="scikit-build-core (the test extra) builds the sdist")
    hook = f"from scikit_build_core.build import build_sdist; print(build_sdist({str(out)!r}))"
    proc = subprocess.run([sys.executable, "-c", hook], cwd=project, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out / proc.stdout.strip().splitlines()[-1]


def members(sdist: Path) -> set[str]:
    """The files of ``sdist``, relative to its top folder."""
    with tarfile.open(sdist) as archive:
        names = [member.name for member in archive.getmembers() if not member.isdir()]
    top = {name.split("/", 1)[0] for name in names}
    assert top == {sdist.name.removesuffix(".tar.gz")}, f"{sdist.name} has the top folders {sorted(top)}"
    return {name.split("/", 1)[1] for name in names}


def assert_ships_the_build_sources_only(sdist: Path, files: set[str]) -> None:
    """``sdist`` holds the needed files of ``files`` (tracked ones), the generated metadata, and nothing else."""
    shipped = members(sdist)
    assert not shipped - files - GENERATED, f"{sdist.name} holds files git does not track: " \
                                            f"{sorted(shipped - files - GENERATED)[:20]}"
    assert not shipped - needed(files) - GENERATED, f"{sdist.name} holds files the build does not need: " \
                                                    f"{sorted(shipped - needed(files) - GENERATED)[:20]}"
    assert needed(files) <= shipped, f"{sdist.name} lacks {sorted(needed(files) - shipped)}"
    assert GENERATED <= shipped


def test_the_sdist_of_the_working_tree_holds_the_tracked_build_sources(tmp_path):
    sdist = build_sdist(ROOT, tmp_path)
    assert_ships_the_build_sources_only(sdist, tracked(ROOT))
    assert "native/src/io.c" in members(sdist) and "slipstream/_native.py" in members(sdist)


@pytest.fixture(scope="module")
def cluttered_copy(tmp_path_factory) -> tuple[Path, set[str]]:
    """A copy of the tracked files with junk planted where a working checkout has it; the tracked files."""
    files = tracked(ROOT)
    copy = tmp_path_factory.mktemp("checkout") / "slipstream"
    for name in files:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, copy / name)
    for name in JUNK:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_bytes(b"not for the sdist\n")
    return copy, files


def test_folders_named_like_shipped_ones_elsewhere_stay_out(cluttered_copy, tmp_path):
    copy, files = cluttered_copy
    sdist = build_sdist(copy, tmp_path)
    assert not set(JUNK) & members(sdist)
    assert_ships_the_build_sources_only(sdist, files)


def test_a_wheel_builds_from_the_sdist_alone(cluttered_copy, tmp_path):
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed")
    sdist = build_sdist(cluttered_copy[0], tmp_path)
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path / "unpacked", filter="data")
    source = tmp_path / "unpacked" / sdist.name.removesuffix(".tar.gz")
    hook = f"from scikit_build_core.build import build_wheel; print(build_wheel({str(tmp_path)!r}))"
    proc = subprocess.run([sys.executable, "-c", hook], cwd=source, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wheel = tmp_path / proc.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {"slipstream/libslipstream.so", "slipstream/_native.py", "slipstream/py.typed"} <= names


def test_the_sdist_of_make_wheel_holds_the_tracked_build_sources():
    named = os.environ.get("SLIPSTREAM_SDIST")
    if not named:
        pytest.skip("SLIPSTREAM_SDIST names the sdist of `make wheel` (CI sets it)")
    assert Path(named).is_file(), f"SLIPSTREAM_SDIST={named} does not exist"
    assert_ships_the_build_sources_only(Path(named), tracked(ROOT))
