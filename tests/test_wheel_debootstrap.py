"""The self-contained wheel on a bare system: a minimal Debian root file
system made with debootstrap (its minbase variant and python3-venv: Python and
pip, no libjpeg, no compiler, no pkg-config), into which the wheel named by
$SLIPSTREAM_WHEEL is pip-installed with its dependencies, torch the same build
as this environment's; there tests/bare_system_epoch.py writes a dataset and
streams one epoch of the ImageNet-train preset, an H.264 clip made on this
side decodes to the frames of this side's FFmpeg with no FFmpeg installed
there, and ldd of the installed library names nothing but the C library and
the loader.

It needs root (debootstrap, chroot, mount), $SLIPSTREAM_WHEEL (.ci/run sets
it after `make wheel`; unlike tests/test_wheel.py this one does not fall back
to dist/, since it costs a minute or two, which `make test` should not pay),
and, the first time, debootstrap and a reachable Debian mirror: the root file
system is then kept as a tar in build/wheel/, named by what debootstrap was
asked for.  Where one of these is missing it skips, saying which, unless
SLIPSTREAM_DEBOOTSTRAP=require (.ci/run sets it), where that is a failure.
The chroot has no network: the dependencies are downloaded on this side, by
this environment's pip with its configured indexes, for the chroot's Python
and glibc, and installed there from that folder alone."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

import bare_system_epoch as epoch
from test_wheel import DECODE, SYSTEM_LIBRARIES, check_decoded, make_clip

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "build" / "wheel"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
VARIANT = "minbase"
# Python with venv and ensurepip's bundled pip: all a user needs to install a wheel (python3-pip would add setuptools
# and wheel, and recommend a compiler).
PACKAGES = ("python3-venv",)
VENV = "/root/venv"
WHEELHOUSE = "/root/wheelhouse"
# What must not be there for the run to show anything: a C compiler, pkg-config, and libjpeg outside the virtual
# environment (Pillow's wheel carries its own, under the venv, which the library must not need either).
TOOLS = ("cc", "gcc", "c99", "clang", "tcc", "pkg-config", "pkgconf")
# The kernel's virtual library, which ldd lists for every program.
VDSO = "linux-vdso.so.1"
TIMEOUT = 600
REQUIRED = os.environ.get("SLIPSTREAM_DEBOOTSTRAP") == "require"


def cannot_run(reason: str) -> None:
    """Skip for want of something this run needs, or fail where .ci/run
    requires the run (SLIPSTREAM_DEBOOTSTRAP=require)."""
    if REQUIRED:
        pytest.fail(f"SLIPSTREAM_DEBOOTSTRAP=require, but {reason}", pytrace=False)
    pytest.skip(reason)


def program(name: str) -> str:
    """The path of a system program, looked up in the sbin folders too
    (debootstrap and chroot live there, outside a user's PATH)."""
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if found is None:
        cannot_run(f"{name} is not installed" + (" (apt-get install debootstrap)" if name == "debootstrap" else ""))
    return found


def show(result: subprocess.CompletedProcess) -> str:
    """A finished command and its output, for a failure's message."""
    command = " ".join(str(part) for part in result.args)
    return f"$ {command}\n(exit status {result.returncode})\n{result.stdout}\n{result.stderr}"


def unmount_below(folder: Path) -> None:
    """Unmount every file system mounted at or below ``folder``, deepest first:
    the run's own mounts, and any debootstrap left behind when it failed."""
    prefix = str(folder.resolve())
    with open("/proc/self/mounts") as table:
        points = [line.split()[1].replace("\\040", " ") for line in table]
    for point in sorted((p for p in points if p == prefix or p.startswith(prefix + "/")), key=len, reverse=True):
        if subprocess.run(["umount", point], check=False, capture_output=True).returncode:
            # Busy, held by a process still running in the chroot: detach it now; it goes when that process does.
            subprocess.run(["umount", "--lazy", point], check=True, capture_output=True)


def remove(folder: Path) -> None:
    """Delete a root file system, after taking every mount out of it, so that
    nothing outside it (a kernel file system) is ever walked into."""
    unmount_below(folder)
    shutil.rmtree(folder, ignore_errors=True)


def root_file_system() -> Path:
    """The tar of the debootstrapped root file system: made on first use and
    kept in build/wheel/, its name a digest of the suite, the variant and the
    packages, so that changing them makes a new one (and drops the old)."""
    key = hashlib.sha256(json.dumps([SUITE, VARIANT, PACKAGES]).encode()).hexdigest()[:12]
    archive = CACHE / f"rootfs-{SUITE}-{key}.tar"
    if archive.is_file():
        return archive
    debootstrap = program("debootstrap")
    try:
        urllib.request.urlopen(f"{MIRROR}/dists/{SUITE}/Release", timeout=30).close()
    except OSError as error:
        cannot_run(f"the Debian mirror {MIRROR} cannot be reached ({error})")
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rootfs-", dir=CACHE))
    try:
        result = subprocess.run([debootstrap, f"--variant={VARIANT}", f"--include={','.join(PACKAGES)}", SUITE,
                                 str(work / "root"), MIRROR],
                                check=False, capture_output=True, text=True, timeout=TIMEOUT)
        if result.returncode:
            log = work / "root" / "debootstrap" / "debootstrap.log"
            detail = log.read_text(errors="replace")[-4000:] if log.is_file() else ""
            pytest.fail(f"debootstrap failed\n{show(result)}\n{detail}", pytrace=False)
        # Written beside the archive and renamed into place: an interrupted run leaves no truncated cache.
        subprocess.run(["tar", "-C", str(work / "root"), "--numeric-owner", "-cf", str(work / "rootfs.tar"), "."],
                       check=True, capture_output=True)
        for old in CACHE.glob(f"rootfs-{SUITE}-*.tar"):
            old.unlink()
        (work / "rootfs.tar").rename(archive)
    finally:
        remove(work)
    return archive


class Chroot:
    """Commands run in the root file system at ``root``, with an environment
    of their own: nothing of this side's (its pip configuration, its paths)
    leaks in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.chroot = program("chroot")
        self.library = ""

    def run(self, *command: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.chroot, str(self.root), "/usr/bin/env", "-i", "PATH=/usr/bin:/bin",
                               "HOME=/root", "LANG=C.UTF-8", *command],
                              check=False, capture_output=True, text=True, timeout=TIMEOUT)

    def check(self, what: str, *command: str) -> str:
        """Its standard output; a failure naming ``what`` and showing the
        command's output where it exits with an error."""
        result = self.run(*command)
        if result.returncode:
            pytest.fail(f"{what} failed in the chroot\n{show(result)}", pytrace=False)
        return result.stdout


@contextlib.contextmanager
def mounted(root: Path) -> Iterator[None]:
    """/proc (Python, torch and the loader read it) and a tmpfs of its own on
    /dev/shm (multiprocessing's semaphores) mounted in ``root`` for the run.
    The rest of /dev is the device nodes debootstrap made: the host's /dev is
    not bound in, so that nothing done in or to the chroot can reach it."""
    try:
        for kind, target in (("proc", root / "proc"), ("tmpfs", root / "dev" / "shm")):
            result = subprocess.run(["mount", "-t", kind, kind, str(target)], check=False, capture_output=True,
                                    text=True)
            if result.returncode:
                pytest.fail(f"cannot mount {kind} in the chroot\n{show(result)}", pytrace=False)
        yield
    finally:
        unmount_below(root)


def install(system: Chroot, wheel: Path) -> None:
    """A virtual environment at VENV holding the wheel and its dependencies,
    installed by the chroot's pip from WHEELHOUSE alone (it has no network);
    ``system.library`` is then the installed libslipstream."""
    probe = "import json, platform, sys; print(json.dumps([sys.version_info[:2], platform.libc_ver()]))"
    (major, minor), (libc, glibc) = json.loads(system.check("Python", "python3", "-c", probe))
    assert libc == "glibc", f"the chroot's C library is {libc!r}, not glibc"
    glibc_major, glibc_minor = (int(part) for part in glibc.split(".")[:2])
    # pip download --platform takes the tags one by one: every manylinux level the chroot's glibc runs.
    platforms = [f"manylinux_{glibc_major}_{level}_x86_64" for level in range(glibc_minor, 4, -1)]
    platforms.append("manylinux2014_x86_64")
    wheelhouse = system.root / WHEELHOUSE.lstrip("/")
    download = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(wheelhouse), "--only-binary=:all:",
         "--python-version", f"{major}.{minor}", "--implementation", "cp", "--abi", f"cp{major}{minor}",
         *(option for tag in platforms for option in ("--platform", tag)),
         str(wheel), f"torch=={metadata.version('torch')}"],
        check=False, capture_output=True, text=True, timeout=TIMEOUT)
    if download.returncode:
        pytest.fail(f"pip download of the wheel's dependencies failed on this side\n{show(download)}", pytrace=False)
    system.check("python3 -m venv", "python3", "-m", "venv", VENV)
    # --no-compile: byte-compiling all of torch is two thirds of the install's time and tells nothing about the wheel;
    # what the epoch imports is compiled when it is imported.
    system.check("pip install of the wheel", f"{VENV}/bin/pip", "install", "--no-compile", "--no-index",
                 "--find-links", WHEELHOUSE, f"{WHEELHOUSE}/{wheel.name}")
    locate = ("import importlib.util, pathlib; "
              "print(pathlib.Path(importlib.util.find_spec('slipstream').origin).parent / 'libslipstream.so')")
    system.library = system.check("finding the installed package", f"{VENV}/bin/python", "-c", locate).strip()


@pytest.fixture(scope="module")
def system(tmp_path_factory) -> Iterator[Chroot]:
    """A fresh copy of the cached root file system with the wheel installed,
    /proc and /dev/shm mounted while the tests run; all removed afterwards."""
    if f"{platform.system()} {platform.machine()}" != "Linux x86_64":
        cannot_run(f"the wheel is for Linux x86-64 (this is {platform.system()} {platform.machine()})")
    named = os.environ.get("SLIPSTREAM_WHEEL")
    if not named:
        cannot_run("SLIPSTREAM_WHEEL is not set (.ci/run sets it after `make wheel`)")
    wheel = Path(named)
    assert wheel.is_file(), f"SLIPSTREAM_WHEEL={named} does not exist"
    if os.geteuid() != 0:
        cannot_run("debootstrap, chroot and mount need root")
    archive = root_file_system()
    folder = tmp_path_factory.mktemp("debootstrap")
    try:
        subprocess.run(["tar", "-C", str(folder), "--numeric-owner", "-xpf", str(archive)], check=True,
                       capture_output=True)
        system = Chroot(folder)
        with mounted(folder):
            install(system, wheel)
            yield system
    finally:
        remove(folder)


def test_the_system_has_no_libjpeg_compiler_or_pkg_config(system):
    found = system.run("sh", "-c", f"command -v {' '.join(TOOLS)}")
    assert not found.stdout.strip(), f"the bare system has a compiler or pkg-config:\n{found.stdout}"
    libjpeg = system.check("find", "find", "/", "-xdev", "-path", VENV, "-prune", "-o", "-name", "libjpeg*", "-print")
    assert not libjpeg.strip(), f"the bare system has libjpeg outside the virtual environment:\n{libjpeg}"
    python = system.check("Python", "python3", "--version")
    assert python.startswith("Python 3."), python


def test_an_epoch_of_the_imagenet_train_preset_streams(system):
    script = Path(epoch.__file__)
    shutil.copy(script, system.root / "root" / script.name)
    output = system.check("the epoch script", f"{VENV}/bin/python", f"/root/{script.name}", "/root/epoch")
    result = json.loads(output.splitlines()[-1])
    assert result["package"].startswith(f"{VENV}/"), f"slipstream was imported from {result['package']}"
    assert result["library"] == [system.library], f"mapped {result['library']}, installed {system.library}"
    samples = 2 * epoch.PER_CLASS
    assert result["labels"] == [0] * epoch.PER_CLASS + [1] * epoch.PER_CLASS, result["labels"]
    full, last = divmod(samples, epoch.BATCH)
    sizes = [epoch.BATCH] * full + ([last] if last else [])
    assert result["shapes"] == [[size, 3, epoch.SIZE, epoch.SIZE] for size in sizes], result["shapes"]


def test_an_h264_clip_decodes_without_ffmpeg_installed(system, tmp_path):
    clip = make_clip(tmp_path, "h264.mp4")
    shutil.copy(clip, system.root / "root" / clip.name)
    found = system.check("find", "find", "/", "-xdev", "-path", VENV, "-prune", "-o", "-name", "libav*", "-print")
    assert not found.strip(), f"the bare system has FFmpeg's libraries outside the virtual environment:\n{found}"
    output = system.check("decoding a clip", f"{VENV}/bin/python", "-c", DECODE, f"/root/{clip.name}")
    report = json.loads(output.splitlines()[-1])
    report[str(clip)] = report.pop(f"/root/{clip.name}")
    check_decoded(report, {"h264.mp4": clip}, system.library)


def test_the_installed_library_needs_only_the_c_library_and_the_loader(system):
    output = system.check("ldd of the installed library", "ldd", system.library)
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    names = {Path(line.split()[0]).name for line in lines}
    outside = names - SYSTEM_LIBRARIES - {VDSO}
    assert "libc.so.6" in names, f"ldd {system.library} does not list the C library:\n{output}"
    assert not outside, f"ldd {system.library} lists {outside}, outside the C library and the loader:\n{output}"
    resolved = [line.split("=>")[1].split()[0] for line in lines if "=>" in line]
    assert all(path.startswith(("/lib/", "/usr/lib/")) for path in resolved), \
        f"ldd {system.library} resolves outside the system's library folders:\n{output}"
