"""From uint8 (height, width, 3) images to the tensors a model takes, in one
pass of the native ``slip_pack``: channel-first layout, element type and
normalization together."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from slipstream import native
from slipstream.compiler import Allocation, Geometry, Operation, State
from slipstream.compiler.params import Choice, Custom, Float, Numbers, Refused, param
from slipstream.compiler.frames import TakesWindows
from slipstream.compiler.rewrites import Foldable

LAYOUTS = ("TCHW", "CTHW")
"""The orders of a window of frames' dimensions that ``Normalize`` writes."""

DTYPES = {np.dtype(np.float32): native.Dtype.FLOAT32, np.dtype(np.float16): native.Dtype.FLOAT16}


def _dtype(dtype: Any) -> np.dtype:
    """A NumPy or torch dtype (or its name) as the NumPy float32 or float16 it is."""
    if hasattr(dtype, "is_floating_point"):  # a torch dtype
        dtype = str(dtype).replace("torch.", "")
    if isinstance(dtype, (bool, np.bool_)) or not isinstance(dtype, (str, type, np.dtype)):
        raise Refused()
    try:
        result = np.dtype(dtype)
    except TypeError:
        raise Refused() from None
    if result not in DTYPES:
        raise Refused()
    return result


FLOAT_DTYPE = Custom(_dtype, "float32 or float16 (a NumPy or torch dtype, or its name)",
                     bad=(np.uint8, "int8", None, 3, True, "float64"), good=np.float16)
"""The element type of normalized samples."""


@dataclasses.dataclass(frozen=True)
class Normalize(Operation, Foldable, TakesWindows):
    """``(x / 255 - mean) / std`` per channel, into a (3, height, width)
    float sample: torchvision's ``ToTensor`` followed by ``Normalize(mean,
    std)``, in one pass.  ``mean`` and ``std`` are on the 0..1 scale, as in
    torchvision; ``dtype`` float32 or float16 (each value correctly rounded)."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    mean: Sequence[float] = param(Numbers(Float(), 3, broadcast=True), "per-channel mean on the 0..1 scale",
                                  default=(0.0, 0.0, 0.0))
    std: Sequence[float] = param(Numbers(Float(0.0, low_open=True), 3, broadcast=True),
                                 "per-channel standard deviation on the 0..1 scale", default=(1.0, 1.0, 1.0))
    dtype: Any = param(FLOAT_DTYPE, "the element type of the samples", default=np.float32, structural=True)
    layout: str = param(Choice(LAYOUTS), "for windows of frames (T, height, width, 3): `TCHW` gives (T, 3, height, "
                        "width) samples, `CTHW` (3, T, height, width)", default="TCHW", structural=True)

    def declare(self, state: State):
        if len(state.shape) not in (3, 4) or state.shape[-1] != 3 or state.dtype != np.uint8:
            raise ValueError(f"Normalize takes (height, width, 3) uint8 images or (frames, height, width, 3) "
                             f"windows of them, got {state.shape} {state.dtype}")
        *frames, h, w, c = state.shape
        shape = (c, h, w) if not frames else (frames[0], c, h, w) if self.layout == "TCHW" else (c, frames[0], h, w)
        return State(shape=shape, dtype=self.dtype), Allocation(shape, self.dtype)

    def fold(self, following: Any) -> Any:
        """``ToTensor()`` then ``Normalize(mean, std)``: one pass."""
        if isinstance(following, Normalize) and self.mean == (0.0,) * 3 and self.std == (1.0,) * 3:
            return following
        return None

    def runtime_values(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation on the 0..255 scale, as ``slip_pack`` takes them."""
        return (np.array(self.mean) * 255.0, np.array(self.std) * 255.0)

    def generate_code(self):
        code = int(DTYPES[self.dtype])
        pack = native.slip_pack

        time_second = self.layout == "CTHW"

        def normalize(x, out, key, values):
            # An image is a window of one frame: (H, W, 3) -> (1, H, W, 3), its out (1, 3, H, W) or (3, 1, H, W).
            mean, std = values
            frames = x.reshape((-1, x.shape[-3], x.shape[-2], x.shape[-1]))
            height, width = frames.shape[1], frames.shape[2]
            if time_second:
                planes = out.reshape((out.shape[0], -1, out.shape[-2], out.shape[-1]))
                for t in range(frames.shape[0]):
                    frame = frames[t]
                    pack(frame, height, width, 3, frame.strides[0], planes[0, t], code, planes.strides[0],
                         planes.strides[2], planes.strides[3], mean, std)
            else:
                planes = out.reshape((-1, out.shape[-3], out.shape[-2], out.shape[-1]))
                for t in range(frames.shape[0]):
                    frame = frames[t]
                    pack(frame, height, width, 3, frame.strides[0], planes[t], code, planes.strides[1],
                         planes.strides[2], planes.strides[3], mean, std)
            return out

        return normalize


def ToTensor(dtype: Any = np.float32) -> Normalize:  # noqa: N802  (torchvision's name)
    """torchvision's ``ToTensor``: (3, height, width) floats in [0, 1].
    A ``Normalize`` right after it joins it in the same single pass."""
    return Normalize(dtype=dtype)
