"""Windows of video frames: the operation that starts a video field's
pipeline, and the decoder it becomes.

``VideoWindow(frames=16, stride=2)`` takes 16 frames, every second one, of
each video; ``VideoWindow(frames=16, rate=15)`` takes 16 frames 1/15 s
apart by their timestamps (the frame showing at each instant, so a
variable frame rate is followed exactly).  The window lies at random in the
video, or in its middle with ``placement="center"``.  A crop after it
(``RandomResizedCrop``, ``CenterCrop``, ``Resize``) and a flip after that
fold into the window: one draw per window, the same crop and flip for
every frame, decoded in one native call that crops each frame's 4:2:0
planes straight to the output size (``slip_video_decode_crop_resize``)::

    [VideoWindow(frames=16, stride=2), RandomResizedCrop(224), RandomHorizontalFlip(),
     Normalize(mean, std)]                                       # (T, 3, 224, 224) per sample

A video with fewer frames than the window spans fails with status
``ESHORT``, which the loader's ``on_error`` applies to.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
from numba import njit, uint64

from slipstream import native
from slipstream.compiler import Allocation, Decoder, Geometry, State
from slipstream.compiler import random as rnd
from slipstream.compiler.params import Choice, Float, Int, OrNone, param, Declares
from slipstream.compiler.rewrites import FieldOperation, Foldable
from slipstream.errors import ArgumentError
from slipstream.fields.decoders import DecodeSource
from slipstream.fields.video import INDEX_ENTRY_BYTES
from slipstream.ops.crops import CROP_DRAWS, INTERPOLATIONS, CroppableWindow, Crop, WindowCrop

WINDOW_DRAWS = rnd.named_draws("window_start")
"""The draw of a sample's key that places its window."""

PLACEMENTS = ("random", "center")

_SHORT = np.int32(native.Status.ESHORT)
_FLIP = int(native.DecodeFlags.FLIP_X)


@njit(nogil=True, inline="always")
def _entry(blob, at):
    """The little-endian int64 at byte ``at`` of ``blob`` (the index need not be aligned)."""
    value = np.int64(0)
    for b in range(8):
        value |= np.int64(blob[at + b]) << np.int64(8 * b)
    return value


@njit(nogil=True)
def window_frames(key, blob, frames, tb_num, tb_den, stride, rate, centred, chosen):
    """Fill ``chosen`` with a window's frame numbers in a video of
    ``frames`` frames whose index is at the start of ``blob``: every
    ``stride``-th frame, or with ``rate`` > 0 the frame showing at each
    instant 1/rate s apart.  The window starts at random (draw
    ``window_start`` of ``key``) or, with ``centred``, in the middle.
    Returns False when the video is shorter than the window."""
    count = chosen.size
    if frames < 1:
        return False
    if rate <= 0.0:
        span = (count - 1) * stride
        if span >= frames:
            return False
        room = frames - span
        drawn = np.int64(rnd.uniform(key, WINDOW_DRAWS.window_start) * room)
        first = (room - 1) // 2 if centred else min(room - 1, drawn)
        for i in range(count):
            chosen[i] = first + i * stride
        return True
    unit = tb_num / tb_den
    start = _entry(blob, 0) * unit
    end = _entry(blob, (frames - 1) * 8) * unit
    span = (count - 1) / rate
    if end - start < span:
        return False
    room = end - start - span
    t0 = start + (0.5 * room if centred else rnd.uniform(key, WINDOW_DRAWS.window_start) * room)
    j = 0
    for i in range(count):
        instant = t0 + i / rate
        # The last frame shown at or before the instant (timestamps ascend).
        while j + 1 < frames and _entry(blob, (j + 1) * 8) * unit <= instant + 1e-9:
            j += 1
        chosen[i] = j
    return True


@dataclasses.dataclass(frozen=True)
class VideoWindow(Declares, FieldOperation, Foldable, CroppableWindow):
    """A window of ``frames`` frames of each video, with one crop and flip
    for all of them (see the module docstring).  Starts a video field's
    pipeline; a crop and a flip after it fold into it.  Without a crop the
    frames are whole, and every video of the field must have one size."""

    frames: int = param(Int(1, 4096), "frames per window (T)", structural=True)
    stride: int = param(Int(1, 1 << 20), "frames from one frame of the window to the next (ignored with `rate`)",
                        default=1)
    rate: float | None = param(OrNone(Float(0.0, 1e6, low_open=True)),
                               "frames per second to sample at, by timestamp, instead of a stride", default=None)
    placement: str = param(Choice(PLACEMENTS), "where the window lies in the video: `random` or `center`",
                           default="random")

    def bind(self, source: DecodeSource, field: str) -> VideoWindowDecoder:
        """The decoder of ``field``'s windows of whole frames."""
        return VideoWindowDecoder(source, field, self, None)

    def fold(self, following: Any) -> WindowCrop | None:
        """A crop after the window becomes its crop."""
        return WindowCrop(self, following) if isinstance(following, Crop) else None

    def bind_cropped(self, source: DecodeSource, field: str, crop: Crop) -> VideoWindowDecoder:
        """The decoder of ``field``'s cropped windows."""
        return VideoWindowDecoder(source, field, self, crop)

    def window_values(self) -> tuple[int, float, bool]:
        """Stride, rate (0: by stride) and whether centred, as the decoder takes them."""
        return (int(self.stride), float(self.rate or 0.0), self.placement == "center")


@dataclasses.dataclass(frozen=True, eq=False)
class VideoWindowDecoder(Decoder):
    """Decodes one window of each video of a ``VideoField`` into
    (frames, height, width, 3) uint8, cropped, resized and flipped alike."""

    source: DecodeSource = dataclasses.field(repr=False)
    field: str
    window: VideoWindow
    crop: Crop | None
    can_fail: ClassVar[bool] = True
    geometry: ClassVar[Geometry] = Geometry.UNTRACKED

    def __post_init__(self) -> None:
        if self.crop is None:
            self._whole_size()

    def _whole_size(self) -> tuple[int, int]:
        records = self.source.records(self.field, "the size every video shares")
        sizes = set(zip(records["height"].tolist(), records["width"].tolist()))
        if len(sizes) > 1:
            some = ", ".join(f"{h}x{w}" for h, w in sorted(sizes)[:4])
            raise ArgumentError(f"{self.source.reader.path}: the videos of field {self.field!r} have {len(sizes)} "
                                f"different sizes ({some}, ...); a batch needs one size: put a crop after the "
                                f"VideoWindow (RandomResizedCrop, CenterCrop, Resize((h, w)))")
        return next(iter(sizes), (1, 1))

    def stored_field(self) -> str:
        """The field it decodes."""
        return self.field

    @property
    def size(self) -> tuple[int, int]:
        """The frames' output (height, width)."""
        return self.crop.output_size if self.crop is not None else self._whole_size()

    def inputs(self) -> tuple[Any, ...]:
        s, f = self.source, self.field
        return (s.storage, s.offsets(f), s.sizes(f), s.column(f, "height", np.int64), s.column(f, "width", np.int64),
                s.column(f, "frames", np.int64), s.column(f, "time_base_num", np.int64),
                s.column(f, "time_base_den", np.int64), s.known)

    def declare(self, state: State | None) -> tuple[State, Allocation]:
        shape = (self.window.frames, *self.size, 3)
        return State(shape=shape, dtype=np.uint8), Allocation(shape, np.uint8)

    def runtime_values(self) -> tuple[Any, ...]:
        """The window's values (:meth:`VideoWindow.window_values`), then the
        crop's flip probability and region values."""
        crop_values = (float(self.crop.flip_p), self.crop.region_values()) if self.crop is not None else (0.0, ())
        return (*self.window.window_values(), *crop_values)

    def generate_code(self):
        crop = self.crop
        region = crop.region() if crop is not None else _whole_frame
        interp = int(INTERPOLATIONS[crop.interpolation]) if crop is not None else int(native.Interp.BILINEAR)
        decode_window = native.slip_video_decode_crop_resize
        entry_bytes = INDEX_ENTRY_BYTES

        def decode(storage, offsets, sizes, heights, widths, frames, tb_num, tb_den, known, index, out, status, key,
                   values):
            stride, rate, centred, flip_p, region_values = values
            status[0] = known
            count = frames[index]
            start = uint64(offsets[index])
            blob = storage[start:start + uint64(sizes[index])]
            chosen = np.empty(out.shape[0], np.int64)
            if status[0] == 0 and not window_frames(key, blob, count, tb_num[index], tb_den[index], stride, rate,
                                                    centred, chosen):
                status[0] = _SHORT
            if status[0] != 0:
                out[:] = 0
                return out
            pts = np.empty(chosen.size, np.int64)
            seek = np.empty(chosen.size, np.int64)
            for i in range(chosen.size):
                pts[i] = _entry(blob, chosen[i] * 8)
                seek[i] = _entry(blob, (count + chosen[i]) * 8)
            height, width = heights[index], widths[index]
            y, x, h, w = region(key, height, width, region_values)
            flip = flip_p > 0.0 and rnd.uniform(key, CROP_DRAWS.flip) < flip_p
            container = blob[uint64(count * entry_bytes):]
            outcome = decode_window(container, uint64(container.size), pts, seek, np.int32(chosen.size), height,
                                    width, y, x, h, w, out.shape[1], out.shape[2], _FLIP if flip else 0, interp, out,
                                    out.size, out.strides[0], out.strides[1])
            status[0] = outcome
            if outcome != 0:
                out[:] = 0
            return out

        return decode

    def fingerprint(self) -> str:
        crop = self.crop.fingerprint() if self.crop is not None else "whole"
        return f"VideoWindowDecoder:{self.window.fingerprint()}:{crop}"


@njit(nogil=True)
def _whole_frame(key, height, width, values):
    return 0, 0, height, width
