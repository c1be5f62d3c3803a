"""Video clips made on the spot, for demos, notebooks, tests and benchmarks
on a machine with no video dataset: a camera panning over and zooming into
a picture, encoded by a real encoder (FFmpeg's command-line tool, from the
``ffmpeg`` package of Debian and Ubuntu) with H.264, HEVC, VP9 or AV1, at a
constant or a variable frame rate.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from slipstream.errors import ArgumentError

CODECS: dict[str, tuple[str, list[str]]] = {
    "h264": (".mp4", ["-c:v", "libx264", "-preset", "veryfast"]),
    "hevc": (".mp4", ["-c:v", "libx265", "-preset", "ultrafast", "-tag:v", "hvc1", "-x265-params", "log-level=error"]),
    "vp9": (".webm", ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "1M"]),
    "av1": (".mkv", ["-c:v", "libaom-av1", "-cpu-used", "8", "-usage", "realtime", "-b:v", "1M"]),
}
"""Each codec's container suffix and FFmpeg encoder options."""


def pan_zoom(picture: np.ndarray, count: int, size: tuple[int, int], zoom: float = 1.5) -> Iterator[np.ndarray]:
    """``count`` (height, width, 3) uint8 frames of ``size`` of a camera that
    pans across ``picture`` from its top left to its bottom right while
    zooming in by ``zoom``."""
    from slipstream import native

    height, width = picture.shape[:2]
    out_h, out_w = size
    for i in range(count):
        progress = i / max(1, count - 1)
        scale = 1.0 / (1.0 + (zoom - 1.0) * progress)
        # The largest window of the output's shape that fits, shrunk by the zoom.
        h = min(height, width * out_h / out_w) * scale
        w = min(width, h * out_w / out_h)
        y, x = (height - h) * progress, (width - w) * progress
        yield native.resize_region(picture, y, x, h, w, out_h, out_w, native.Interp.BILINEAR)


def encode_clip(path: str | Path, frames: Iterator[np.ndarray], size: tuple[int, int], fps: float = 30.0,
                codec: str = "h264", variable_rate: bool = False, keyframe_interval: int | None = None,
                pixel_format: str = "yuv420p") -> Path:
    """Encode ``frames`` ((height, width, 3) uint8 each, ``size``) into a
    video file at ``path`` with FFmpeg's ``codec`` encoder (one of
    :data:`CODECS`), ``fps`` frames a second, or with ``variable_rate``
    every third frame shown half a frame longer (timestamps that no constant
    rate gives).  ``keyframe_interval`` frames between keyframes (the
    encoder's default when None).  Returns ``path``.

    Raises:
        ArgumentError: an unknown codec, or no ``ffmpeg`` on the PATH.
        RuntimeError: the encoder failed (its messages included).
    """
    if codec not in CODECS:
        raise ArgumentError(f"codec must be one of {sorted(CODECS)}, got {codec!r}")
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise ArgumentError("making video clips needs FFmpeg's command-line tool: sudo apt-get install ffmpeg")
    height, width = size
    command = [ffmpeg, "-hide_banner", "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24",
               "-s", f"{width}x{height}", "-r", str(fps), "-i", "-"]
    if variable_rate:
        command += ["-vf", "settb=1/90000,setpts=(N+0.5*floor(N/3))/FRAME_RATE/TB", "-fps_mode", "passthrough",
                    "-enc_time_base", "1/90000", "-video_track_timescale", "90000"]
    command += CODECS[codec][1] + ["-pix_fmt", pixel_format]
    if keyframe_interval is not None:
        command += ["-g", str(keyframe_interval)]
    command.append(str(path))
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin is not None
    try:
        for frame in frames:
            process.stdin.write(np.ascontiguousarray(frame, np.uint8).tobytes())
    except BrokenPipeError:
        pass
    finally:
        process.stdin.close()
    errors = process.stderr.read().decode("utf-8", "replace") if process.stderr else ""
    if process.wait() != 0:
        raise RuntimeError(f"ffmpeg could not encode {path} with {codec}: {errors.strip()}")
    return Path(path)


def synthetic_video_folder(folder: str | Path, pictures: list[np.ndarray], per_class: int = 2, seconds: float = 2.0,
                           fps: float = 30.0, size: tuple[int, int] = (180, 320), codec: str = "h264") -> Path:
    """A Kinetics-layout folder, ``folder/<class_k>/clip_<i>.<suffix>``: one
    class per picture, ``per_class`` clips each panning over it at a
    different zoom.  Returns ``folder``."""
    root = Path(folder)
    suffix = CODECS[codec][0] if codec in CODECS else ""
    count = max(1, round(seconds * fps))
    for k, picture in enumerate(pictures):
        for i in range(per_class):
            path = root / f"class_{k}" / f"clip_{i}{suffix}"
            path.parent.mkdir(parents=True, exist_ok=True)
            encode_clip(path, pan_zoom(picture, count, size, zoom=1.2 + 0.3 * i), size, fps, codec)
    return root


__all__ = ["CODECS", "encode_clip", "pan_zoom", "synthetic_video_folder"]
