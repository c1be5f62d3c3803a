"""From uint8 (height, width, 3) images to the tensors a model takes, in one
pass of the native ``slip_pack``: channel-first layout, element type and
normalization together."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from slipstream import native
from slipstream.compiler import Allocation, Operation, State
from slipstream.compiler.rewrites import Foldable

DTYPES = {np.dtype(np.float32): native.Dtype.FLOAT32, np.dtype(np.float16): native.Dtype.FLOAT16}


def _dtype(dtype: Any) -> np.dtype:
    if hasattr(dtype, "is_floating_point"):  # a torch dtype
        dtype = str(dtype).replace("torch.", "")
    result = np.dtype(dtype)
    if result not in DTYPES:
        raise ValueError(f"dtype must be float32 or float16, got {dtype}")
    return result


@dataclasses.dataclass(frozen=True)
class Normalize(Operation, Foldable):
    """``(x / 255 - mean) / std`` per channel, into a (3, height, width)
    float sample: torchvision's ``ToTensor`` followed by ``Normalize(mean,
    std)``, in one pass.  ``mean`` and ``std`` are on the 0..1 scale, as in
    torchvision; ``dtype`` float32 or float16 (each value correctly rounded)."""

    mean: Sequence[float] = (0.0, 0.0, 0.0)
    std: Sequence[float] = (1.0, 1.0, 1.0)
    dtype: Any = np.float32

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", tuple(float(m) for m in np.broadcast_to(self.mean, 3)))
        object.__setattr__(self, "std", tuple(float(s) for s in np.broadcast_to(self.std, 3)))
        if any(s == 0 for s in self.std):
            raise ValueError(f"std must not be 0, got {self.std}")
        object.__setattr__(self, "dtype", _dtype(self.dtype))

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

    def generate_code(self):
        mean = np.array(self.mean) * 255.0
        std = np.array(self.std) * 255.0
        code = int(DTYPES[self.dtype])
        pack = native.slip_pack

        def normalize(x, out, key):
            pack(x, x.shape[0], x.shape[1], x.shape[2], x.strides[0], out, code, out.strides[0], out.strides[1],
                 out.strides[2], mean, std)
            return out

        return normalize


def ToTensor(dtype: Any = np.float32) -> Normalize:  # noqa: N802  (torchvision's name)
    """torchvision's ``ToTensor``: (3, height, width) floats in [0, 1].
    A ``Normalize`` right after it joins it in the same single pass."""
    return Normalize(dtype=dtype)
