"""Videos, stored as their container's bytes with an index of their frames.

A :class:`VideoField` keeps each video exactly as it was given (MP4,
Matroska, WebM: whatever FFmpeg's libavformat reads), nothing re-encoded,
and in front of it the index that :func:`slipstream.native.video_index`
computes when the dataset is written: every frame's presentation timestamp
and the timestamp of the keyframe decoding must start at to reach it.  A
loader picks a window's frames from the index (by frame number, or by time
for a rate in Hz) and the decode seeks straight to the window's keyframe.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

import numpy as np

from slipstream import native
from slipstream.errors import ArgumentError, FieldValueError
from slipstream.fields.base import Encoded, Field, file_value, first_problem

INDEX_ENTRY_BYTES = 16
"""Bytes of the index per frame: its timestamp and its keyframe's, int64 each."""

CHECK_FRAMES = 32
"""Frames decoded per native call by :meth:`StoredVideo.frames` and
:meth:`VideoField.check_decodes`: a few at a time, each call far within the
native limit on the frames one call may decode."""

VIDEO_SUFFIXES = frozenset({".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi"})
"""The file suffixes read as videos from a folder."""


@dataclasses.dataclass(frozen=True)
class VideoClip:
    """A part of a video, as a :class:`VideoField` value: the frames shown
    from ``start`` up to ``end`` seconds, counted from the video's first
    frame (None: from its first frame, to its last).  The whole container
    is stored, so a window's decode starts at the keyframe before the clip
    where the clip starts between keyframes; the index holds the clip's
    frames only, so windows lie inside the clip.

    Attributes:
        video: a path to the video file, or its bytes.
        start, end: seconds, ``0 <= start < end``.
    """

    video: str | os.PathLike | bytes
    start: float | None = None
    end: float | None = None

    def __post_init__(self) -> None:
        start, end = self.start, self.end
        for name, value in (("start", start), ("end", end)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value) or value < 0):
                raise ArgumentError(f"a clip's {name} must be a number of seconds of at least 0, got {value!r}")
        if start is not None and end is not None and end <= start:
            raise ArgumentError(f"a clip must end after it starts, got start={start!r}, end={end!r}")

    def frames_kept(self, seconds: np.ndarray) -> np.ndarray:
        """Which of the frames shown at ``seconds`` (from the first frame
        on, ascending) the clip holds, as a bool per frame."""
        shown = seconds - (seconds[0] if seconds.size else 0.0)
        kept = np.ones(shown.size, bool)
        if self.start is not None:
            kept &= shown >= self.start - 1e-9
        if self.end is not None:
            kept &= shown < self.end - 1e-9
        return kept


@dataclasses.dataclass(frozen=True)
class StoredVideo:
    """One stored video: its container's bytes, its index and its facts.

    Attributes:
        container: the video file's bytes, as written.
        pts: int64 per frame, in presentation order: its timestamp, in
            units of ``time_base`` seconds.
        seek: int64 per frame: the timestamp of the keyframe its decoding
            starts at.
        height, width: the frames' size in pixels.
        time_base: ``(numerator, denominator)`` of the timestamps' unit.
    """

    container: bytes
    pts: np.ndarray
    seek: np.ndarray
    height: int
    width: int
    time_base: tuple[int, int]

    @property
    def seconds(self) -> np.ndarray:
        """Every frame's timestamp in seconds (float64)."""
        return self.pts * (self.time_base[0] / self.time_base[1])

    def frames(self, indices: Any = None) -> np.ndarray:
        """The frames at ``indices`` (frame numbers in presentation order,
        non-decreasing; all of them by default), decoded whole to a
        (count, height, width, 3) uint8 array."""
        chosen = np.arange(len(self.pts)) if indices is None else np.asarray(indices, np.int64).reshape(-1)
        if chosen.size and (chosen.min() < 0 or chosen.max() >= len(self.pts)):
            raise ArgumentError(f"frame numbers must lie in 0 to {len(self.pts) - 1}, got {chosen.min()} to "
                                f"{chosen.max()}")
        out = np.empty((chosen.size, self.height, self.width, 3), np.uint8)
        for start in range(0, chosen.size, CHECK_FRAMES):  # calls of a few frames: the native decode limit
            part = chosen[start:start + CHECK_FRAMES]
            native.video_decode_crop_resize(self.container, self.pts[part], self.seek[part], self.height, self.width,
                                            0, 0, self.height, self.width, self.height, self.width,
                                            out=out[start:start + part.size])
        return out

    def __len__(self) -> int:
        return len(self.pts)


@dataclasses.dataclass(frozen=True)
class VideoField(Field, type_id=10):
    """A video per sample: the container's bytes as given, with the index of
    its first video stream's frames (see the module docstring).  The record
    holds the frames' size, their number, the keyframes' and the unit of
    the timestamps, so a loader plans windows and crops without opening a
    container.

    Accepted values: a path to a video file, its bytes, a
    ``{"bytes": ..., "path": ...}`` dict, or a :class:`VideoClip` (part of
    a video, whose index holds the clip's frames only).  Writing a video reads its
    container and decodes its first frame; a video no demuxer reads, without
    a video stream, whose frames are not 8-bit YCbCr 4:2:0, or beyond the
    native limits is refused with the reason (the writer's ``on_error``
    applies).  Needs a build of slipstream with FFmpeg
    (:func:`slipstream.native.video_available`).
    """

    def record_dtype(self) -> np.dtype:
        return np.dtype([("offset", "<u8"), ("size", "<u8"), ("height", "<u4"), ("width", "<u4"),
                         ("frames", "<u4"), ("keyframes", "<u4"), ("time_base_num", "<i8"), ("time_base_den", "<i8"),
                         ("codec", "u1"), ("colour", "u1"), ("reserved", "V6")])

    def encode(self, value: Any) -> Encoded:
        clip = value if isinstance(value, VideoClip) else VideoClip(value)
        data = _load(clip.video)
        info, pts, seek = native.video_index(data)
        if not info.yuv420:
            raise FieldValueError("the video's frames are not 8-bit YCbCr 4:2:0 (yuv420p), which slipstream "
                                  "decodes: convert it, e.g. `ffmpeg -i in -pix_fmt yuv420p -c:v libx264 out.mp4`")
        seconds = pts * (info.time_base[0] / info.time_base[1])
        kept = clip.frames_kept(seconds)
        if not kept.any():
            raise FieldValueError(f"the clip from {clip.start or 0} to {clip.end} s holds no frame of the video, "
                                  f"whose {len(pts)} frames are shown from 0 to {seconds[-1] - seconds[0]:.3f} s")
        pts, seek = pts[kept], seek[kept]
        record = {"height": info.height, "width": info.width, "frames": pts.size, "keyframes": np.unique(seek).size,
                  "time_base_num": info.time_base[0], "time_base_den": info.time_base[1], "codec": int(info.codec),
                  "colour": int(info.colour)}
        return Encoded(record, pts.tobytes() + seek.tobytes() + data)

    def check_records(self, records: np.ndarray) -> tuple[int, str] | None:
        """At least one frame, a size of 1 to 65500 pixels a side, a
        positive unit of time, and stored bytes holding the index and some
        container."""
        frames, size = records["frames"].astype(np.uint64), records["size"].astype(np.uint64)
        height, width = records["height"].astype(np.int64), records["width"].astype(np.int64)
        limit = native.MAX_DIMENSION
        problems = [
            (frames < 1, "has no frames"),
            ((height < 1) | (width < 1) | (height > limit) | (width > limit),
             f"has a size outside 1 to {limit} pixels"),
            ((records["time_base_num"] < 1) | (records["time_base_den"] < 1), "has no unit of time"),
            (size <= frames * np.uint64(INDEX_ENTRY_BYTES), "holds fewer bytes than its index"),
        ]
        return first_problem(problems, lambda i: f"{height[i]}x{width[i]}, {frames[i]} frames, {size[i]} bytes")

    def read(self, record: np.void, data: memoryview | None) -> StoredVideo:
        """The stored video (:class:`StoredVideo`)."""
        frames = int(record["frames"])
        raw = bytes(data)
        index = np.frombuffer(raw, np.int64, 2 * frames)
        return StoredVideo(raw[INDEX_ENTRY_BYTES * frames:], index[:frames].copy(), index[frames:].copy(),
                           int(record["height"]), int(record["width"]),
                           (int(record["time_base_num"]), int(record["time_base_den"])))

    def check_decodes(self, value: StoredVideo) -> None:
        """Decode every frame of ``value``, a few at a time, raising the
        first frame's error."""
        for start in range(0, len(value), CHECK_FRAMES):
            chosen = slice(start, start + CHECK_FRAMES)
            native.video_decode_planes(value.container, value.pts[chosen], value.seek[chosen], value.height,
                                       value.width)

    def default_pipeline(self, name: str, source: Any) -> list[Any]:
        """Refused: a video field's pipeline starts with a window (:class:`slipstream.ops.VideoWindow`)."""
        raise ArgumentError(f"field {name!r} holds videos: give it a pipeline that starts with a window of frames, "
                            "e.g. [VideoWindow(frames=16, stride=2), RandomResizedCrop(224), ToTensor()]")


def _load(value: Any) -> bytes:
    """The container's bytes of a path, bytes or ``{"bytes", "path"}`` dict."""
    value = file_value(value, "a video")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"not a video: {type(value).__name__} (give a path or the file's bytes)")
