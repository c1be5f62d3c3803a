"""The self-contained wheel of `make wheel`: its tags, its contents, and a
library that needs nothing from the machine but glibc, exports nothing but
the ABI, and decodes the video codecs of the FFmpeg linked into it (clips
made by FFmpeg's command-line tool, decoded to the same frames).  Checks the
wheel named by $SLIPSTREAM_WHEEL (CI sets it after `make wheel`; then it must
exist), else the one in dist/, else skips."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from slipstream import _native

ROOT = Path(__file__).resolve().parent.parent
PLATFORM = "manylinux_2_17_x86_64"
GLIBC = (2, 17)
# What the loader finds on every Linux with glibc: the C library, split in three before glibc 2.34, and the loader.
SYSTEM_LIBRARIES = {"libc.so.6", "libm.so.6", "libpthread.so.0", "ld-linux-x86-64.so.2"}
# Symbols of the static libraries linked in, none of which may be exported or imported: libjpeg-turbo's, FFmpeg's.
STATIC_SYMBOLS = re.compile(r"\b(j(peg|simd)|av(codec|format|io|util)?|ff|swr|sws)_\w+")

# One clip per codec and container the wheel's FFmpeg decodes, and AV1, which it does not: FFmpeg's test pattern,
# CLIP_FRAMES frames of CLIP_SIZE with a keyframe every 5, encoded by FFmpeg's command-line tool.
CLIP_SIZE = (64, 96)
CLIP_FRAMES = 12
CLIPS = {
    "h264.mp4": ["-c:v", "libx264", "-preset", "veryfast"],
    "hevc.mkv": ["-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "log-level=error"],
    "vp8.webm": ["-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "16"],
    "vp9.webm": ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8"],
    "mpeg4.avi": ["-c:v", "mpeg4"],
    "av1.mkv": ["-c:v", "libaom-av1", "-usage", "realtime", "-cpu-used", "8"],
}
UNDECODED = {"av1.mkv": "has no decoder of the video's codec (av1)"}

# Run by a Python whose slipstream loads the library to check (the paths of clips in argv): whether it decodes
# video, and per clip its index and the SHA-256 of every frame's planes, decoded all at once and as a window of
# the last two (which seeks), or the error.
DECODE = """
import hashlib, json, sys
from slipstream import _abi, native
report = {"available": native.video_available(), "library": str(_abi.library_path())}
for path in sys.argv[1:]:
    data = open(path, "rb").read()
    try:
        info, pts, seek = native.video_index(data)
        planes = native.video_decode_planes(data, pts, seek, info.height, info.width)
        last = native.video_decode_planes(data, pts[-2:], seek[-2:], info.height, info.width)
        report[path] = {"size": [info.height, info.width], "frames": info.frames, "keyframes": info.keyframes,
                        "planes": [hashlib.sha256(frame.tobytes()).hexdigest() for frame in planes],
                        "last": [hashlib.sha256(frame.tobytes()).hexdigest() for frame in last]}
    except Exception as error:
        report[path] = {"error": f"{type(error).__name__}: {error}"}
print(json.dumps(report))
"""


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


def ffmpeg() -> str:
    found = shutil.which("ffmpeg")
    if found is None:
        pytest.skip("the clips are made by FFmpeg's command-line tool (apt-get install ffmpeg)")
    return found


def make_clip(folder: Path, name: str) -> Path:
    """The clip ``name`` of CLIPS, in ``folder``."""
    path = folder / name
    height, width = CLIP_SIZE
    subprocess.run([ffmpeg(), "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                    f"testsrc2=size={width}x{height}:rate=25", "-frames:v", str(CLIP_FRAMES), *CLIPS[name],
                    "-g", "5", "-pix_fmt", "yuv420p", str(path)], check=True, capture_output=True)
    return path


def reference_planes(path: Path) -> list[str]:
    """The SHA-256 of each frame's planes as FFmpeg's command-line tool decodes them, in presentation order."""
    raw = subprocess.run([ffmpeg(), "-hide_banner", "-loglevel", "error", "-i", str(path), "-f", "rawvideo",
                          "-pix_fmt", "yuv420p", "-fps_mode", "passthrough", "-"],
                         check=True, capture_output=True).stdout
    height, width = CLIP_SIZE
    frame = height * width + 2 * ((height + 1) // 2) * ((width + 1) // 2)
    assert raw and len(raw) % frame == 0, (path, len(raw))
    return [hashlib.sha256(raw[at:at + frame]).hexdigest() for at in range(0, len(raw), frame)]


def check_decoded(report: dict, clips: dict[str, Path], library: str) -> None:
    """That the DECODE report is of ``library`` and gives every clip FFmpeg's own frames, and AV1 the error
    naming the missing decoder."""
    assert report["library"] == library and report["available"] is True, report
    for name, path in clips.items():
        result = report[str(path)]
        if name in UNDECODED:
            assert UNDECODED[name] in result.get("error", ""), (name, result)
            continue
        assert "error" not in result, (name, result)
        reference = reference_planes(path)
        assert result["size"] == list(CLIP_SIZE) and result["frames"] == len(reference) == CLIP_FRAMES, (name, result)
        assert result["keyframes"] >= -(-CLIP_FRAMES // 5), (name, result)  # the last two frames need a seek
        differ = [i for i, (a, b) in enumerate(zip(result["planes"], reference)) if a != b]
        assert not differ, f"{name}: frames {differ} are not those of FFmpeg's command-line tool"
        assert result["last"] == reference[-2:], name


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


def test_the_library_exports_the_abi_and_not_libjpeg_or_ffmpeg(library):
    # A process that also loads another libjpeg (torch, Pillow) or FFmpeg (PyAV, torchcodec) must not bind to
    # this library's copies, nor this library to theirs.
    symbols = binutils("nm", "--dynamic", "--defined-only", str(library))
    exported = {line.split()[-1] for line in symbols.splitlines() if line.strip()}
    assert exported == set(_native.FUNCTIONS)
    assert all(name.startswith("slip_") for name in exported)
    undefined = binutils("nm", "--dynamic", "--undefined-only", str(library))
    visible = STATIC_SYMBOLS.findall(symbols + undefined)
    assert not visible, f"libjpeg's or FFmpeg's symbols are visible: {visible[:10]}"


def test_the_library_carries_libjpeg_turbos_simd_code(library):
    # The x86-64 SIMD dispatcher of libjpeg-turbo reads these variables when it
    # picks SSE2 or AVX2 code; a build without SIMD has a dispatcher that
    # reads none (the library's symbols are stripped, so its strings tell).
    data = library.read_bytes()
    assert b"JSIMD_FORCEAVX2" in data and b"JSIMD_FORCESSE2" in data


def test_the_wheel_carries_the_licences_of_what_is_linked_in(wheel):
    script = (ROOT / "packaging" / "build-wheel.sh").read_text()
    version = re.search(r"^FFMPEG_VERSION=(\S+)$", script, re.MULTILINE)[1]
    digest = re.search(r"^FFMPEG_TARBALL_SHA256=([0-9a-f]{64})$", script, re.MULTILINE)[1]
    with zipfile.ZipFile(wheel) as archive:
        licences = {name.split(".dist-info/licenses/", 1)[1]: name for name in archive.namelist()
                    if ".dist-info/licenses/" in name and not name.endswith("/")}
        read = {name: archive.read(path).decode() for name, path in licences.items()}
    assert {"LICENSE", "FFmpeg/COPYING.LGPLv2.1", "FFmpeg/NOTICE", "libjpeg-turbo/LICENSE.md",
            "libjpeg-turbo/README.ijg"} <= set(licences), sorted(licences)
    assert "GNU LESSER GENERAL PUBLIC LICENSE" in read["FFmpeg/COPYING.LGPLv2.1"]
    assert "Version 2.1" in read["FFmpeg/COPYING.LGPLv2.1"]
    notice = read["FFmpeg/NOTICE"]
    assert f"FFmpeg {version}" in notice and digest in notice and "version 2.1 or later" in notice
    assert "packaging/build-wheel.sh" in notice and "--enable-gpl" in notice.replace("\n", " ")
    assert "libjpeg-turbo" in read["libjpeg-turbo/LICENSE.md"]


def test_the_library_decodes_video_with_its_own_ffmpeg(library, tmp_path):
    # In a Python of its own, whose slipstream loads the wheel's library whichever this one loaded; the frames
    # are those of the system's FFmpeg (the same decoders, which are bit-exact), every codec in its container.
    clips = {name: make_clip(tmp_path, name) for name in CLIPS}
    result = subprocess.run([sys.executable, "-c", DECODE, *map(str, clips.values())], check=False,
                            capture_output=True, text=True, env={**os.environ, "SLIPSTREAM_LIBRARY": str(library)},
                            timeout=300)
    assert result.returncode == 0, result.stderr
    check_decoded(json.loads(result.stdout.splitlines()[-1]), clips, str(library))


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
