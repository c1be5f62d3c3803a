"""Windows of consecutive samples of an image dataset: video stored as its
frames (JPEG files, Something-Something's layout) or any ordered dataset,
loaded T samples at a time with one augmentation for the window.

``SequenceWindow(frames=8, stride=2)`` starts an image field's pipeline:
the sample at dataset index ``i`` becomes the window of the images at
``i, i + 2, ..., i + 14``.  A crop after it (``RandomResizedCrop``,
``CenterCrop``, ``Resize``) and a flip after that fold into it and are
drawn once per window, from the window's key: every frame is cropped at the
same place of its image (scaled to the frame's size where frames differ in
size) and flipped alike, each decoded by the native call that decodes a
single image's crop.  The other fields of the sample are those of the
window's first frame.

Which indices start a window is the loader's ``indices``:
:func:`window_starts` gives those whose window stays inside the dataset and
inside one run of a ``group`` field (the video each frame belongs to), so
that orders, epochs, resumes and distributed sharding run over windows::

    starts = ss.window_starts("frames.slip", frames=8, stride=2, group="video")
    loader = ss.Loader("frames.slip", batch_size=16, indices=starts,
                       pipelines={"image": [SequenceWindow(8, stride=2), RandomResizedCrop(112),
                                            RandomHorizontalFlip(), Normalize(mean, std)]})
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, ClassVar

import numpy as np
from numba import njit

from slipstream import native
from slipstream.compiler import Allocation, Decoder, Geometry, State
from slipstream.compiler.params import Declares, Int, param
from slipstream.compiler.rewrites import FieldOperation, Foldable
from slipstream.errors import ArgumentError
from slipstream.fields import geometry
from slipstream.fields.decoders import DecodeSource
from slipstream.ops.crops import CroppableWindow, Crop, CropDecoder, WindowCrop


_SHORT = np.int32(native.Status.ESHORT)


@dataclasses.dataclass(frozen=True)
class SequenceWindow(Declares, FieldOperation, Foldable, CroppableWindow):
    """The window of ``frames`` images at ``stride`` from each sample's
    index (see the module docstring).  Starts an image field's pipeline and
    must be followed by a crop, which folds into it with the flip after
    that."""

    frames: int = param(Int(1, 4096), "images per window (T)", structural=True)
    stride: int = param(Int(1, 1 << 20), "dataset indices from one image of the window to the next", default=1)

    def bind(self, source: DecodeSource, field: str) -> Any:
        """Refused: a window's images need one size, which a crop gives."""
        raise ArgumentError(f"{self!r} in the pipeline of {field!r} must be followed by a crop that gives its images "
                            f"one size (RandomResizedCrop, CenterCrop, Resize((h, w)))")

    def fold(self, following: Any) -> WindowCrop | None:
        """A crop after the window becomes its crop."""
        return WindowCrop(self, following) if isinstance(following, Crop) else None

    def bind_cropped(self, source: DecodeSource, field: str, crop: Crop) -> SequenceDecoder:
        """The decoder of ``field``'s windows; the stager brings in the pages of every frame."""
        source.read_also(field, range(0, self.frames * self.stride, self.stride))
        return SequenceDecoder(source, field, self, crop)


@dataclasses.dataclass(frozen=True, eq=False)
class SequenceDecoder(Decoder):
    """Decodes the window of images at ``index, index + stride, ...`` of an
    image field into (frames, height, width, 3) uint8 with one draw of the
    crop and flip, made from the window's key."""

    source: DecodeSource = dataclasses.field(repr=False)
    field: str
    window: SequenceWindow
    crop: Crop
    can_fail: ClassVar[bool] = True
    geometry: ClassVar[Geometry] = Geometry.UNTRACKED

    def stored_field(self) -> str:
        """The field it decodes."""
        return self.field

    def inputs(self) -> tuple[Any, ...]:
        return self.source.image_inputs(self.field)

    def declare(self, state: State | None) -> tuple[State, Allocation]:
        shape = (self.window.frames, *self.crop.output_size, 3)
        return State(shape=shape, dtype=np.uint8), Allocation(shape, np.uint8)

    def runtime_values(self) -> tuple[Any, ...]:
        """The stride, then the crop's flip probability and region values."""
        return (int(self.window.stride), float(self.crop.flip_p), self.crop.region_values())

    def generate_code(self):
        single = CropDecoder(self.source, self.field, self.crop)
        region, decode_region = self.crop.region(), single.region_decoder()
        transform_size = geometry.SIZE

        def decode(storage, offsets, sizes, heights, widths, modes, known, decodes, index, out, status, key, values):
            stride, flip_p, region_values = values
            height, width = heights[index], widths[index]
            y, x, h, w = region(key, height, width, region_values)
            transform = np.empty(transform_size, np.float64)
            frame_status = np.zeros(1, np.int32)
            status[0] = known
            # The columns' length, read at run time rather than compiled in.
            samples = heights.shape[0]
            for t in range(out.shape[0]):
                at = index + t * stride
                if status[0] != 0 or at >= samples:
                    status[0] = _SHORT if status[0] == 0 else status[0]  # past the dataset's end
                    break
                # The window's region, at the same place of a frame of another size.
                fy, fx, fh, fw = _scaled(y, x, h, w, height, width, heights[at], widths[at])
                decode_region(storage, offsets, sizes, heights, widths, modes, np.int32(0), decodes, at, out[t],
                              transform, frame_status, key, fy, fx, fh, fw, flip_p)
                status[0] = frame_status[0]
            if status[0] != 0:
                out[:] = 0
            return out

        return decode

    def fingerprint(self) -> str:
        return f"SequenceDecoder:{self.window.fingerprint()}:{self.crop.fingerprint()}:{self.source.count_decodes}"


@njit(nogil=True, inline="always")
def _scaled(y, x, h, w, height, width, frame_h, frame_w):
    """The region (y, x, h, w) of a height x width image at the same place of a frame_h x frame_w one."""
    if frame_h == height and frame_w == width:
        return y, x, h, w
    fy, fx = y * frame_h // height, x * frame_w // width
    fh = max(1, min(frame_h - fy, h * frame_h // height))
    fw = max(1, min(frame_w - fx, w * frame_w // width))
    return fy, fx, fh, fw


def window_starts(dataset: Any, frames: int, stride: int = 1, group: str | None = None) -> np.ndarray:
    """The dataset indices that start a window of ``frames`` samples at
    ``stride`` (:class:`SequenceWindow`): those whose last sample lies
    inside the dataset and, with ``group`` (a scalar field such as the
    video each frame belongs to), lies in the same run of equal ``group``
    values as the first (a value that comes back after another starts
    another run).  Give them to the loader as
    ``indices``.

    Args:
        dataset: a dataset file's path, or an open reader.
        frames, stride: the window's, as :class:`SequenceWindow` takes them.
        group: a field of one number per sample; None: the whole dataset is
            one sequence.

    Raises:
        ArgumentError: ``frames`` or ``stride`` below 1, an unknown
            ``group`` field, or one whose records hold no single number.
    """
    from slipstream.format import open_dataset

    if not (isinstance(frames, int) and frames >= 1 and isinstance(stride, int) and stride >= 1):
        raise ArgumentError(f"frames and stride must be integers of at least 1, got {frames!r} and {stride!r}")
    reader = open_dataset(dataset) if isinstance(dataset, (str, os.PathLike)) else dataset
    span = (frames - 1) * stride
    count = len(reader) - span
    if count <= 0:
        return np.zeros(0, np.int64)
    starts = np.arange(count, dtype=np.int64)
    if group is None:
        return starts
    if group not in reader.fields:
        raise ArgumentError(f"{reader.path} has no field {group!r} (fields: {', '.join(reader.fields)})")
    records = reader.metadata[group]
    values = records["value"] if records.dtype.names and "value" in records.dtype.names else None
    if values is None or values.ndim != 1:
        raise ArgumentError(f"field {group!r} of {reader.path} holds no single number per sample: group windows by "
                            f"an IntField (the video each frame belongs to)")
    # Runs of equal values, numbered: a window lies in one run when its first and last samples' numbers agree
    # (a value that comes back after another is another run, another video).
    runs = np.concatenate([[0], np.cumsum(values[1:] != values[:-1])])
    return starts[runs[starts] == runs[starts + span]]


__all__ = ["SequenceWindow", "window_starts"]
