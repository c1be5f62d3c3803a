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
from slipstream.compiler.params import Custom, Float, Numbers, Refused, param
from slipstream.compiler.rewrites import Foldable

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
class Normalize(Operation, Foldable):
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

    def declare(self, state: State):
        if len(state.shape) != 3 or state.shape[2] != 3 or state.dtype != np.uint8:
            raise ValueError(f"Normalize takes (height, width, 3) uint8 images, got {state.shape} {state.dtype}")
        h, w, c = state.shape
        return State(shape=(c, h, w), dtype=self.dtype), Allocation((c, h, w), self.dtype)

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

        def normalize(x, out, key, values):
            mean, std = values
            pack(x, x.shape[0], x.shape[1], x.shape[2], x.strides[0], out, code, out.strides[0], out.strides[1],
                 out.strides[2], mean, std)
            return out

        return normalize


def ToTensor(dtype: Any = np.float32) -> Normalize:  # noqa: N802  (torchvision's name)
    """torchvision's ``ToTensor``: (3, height, width) floats in [0, 1].
    A ``Normalize`` right after it joins it in the same single pass."""
    return Normalize(dtype=dtype)
