"""What flows along a pipeline: the state of each node's output, and the
memory an operation asks for."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np


def _normalize_dtype(dtype: Any) -> Any:
    """NumPy dtypes are kept as ``np.dtype``; torch dtypes stay as they are."""
    if type(dtype).__module__.startswith("torch"):
        return dtype
    return np.dtype(dtype)


def _normalize_fields(obj: Any) -> None:
    """Canonical shape (a tuple of ints, none negative) and dtype of a frozen
    State or Allocation, so that equal descriptions compare equal."""
    object.__setattr__(obj, "shape", tuple(int(s) for s in obj.shape))
    object.__setattr__(obj, "dtype", _normalize_dtype(obj.dtype))
    if any(s < 0 for s in obj.shape):
        raise ValueError(f"shape {obj.shape} has a negative dimension")


@dataclasses.dataclass(frozen=True)
class State:
    """The output of a pipeline node, per sample.

    Attributes:
        jit: True when the value is produced by compiled (Numba) code as a
            NumPy array; False when it is a torch tensor handled in Python.
        shape: per-sample shape (the batch dimension is not included).
        dtype: NumPy dtype for jit values, torch dtype otherwise.
        device: where the value lives: ``"cpu"`` or a torch device string.
    """

    jit: bool
    shape: tuple[int, ...]
    dtype: Any
    device: str = "cpu"

    def __post_init__(self) -> None:
        _normalize_fields(self)

    def replace(self, **changes: Any) -> State:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def describe(self, compact: bool = False) -> str:
        """The state in words, for messages ("an array of shape (32, 32, 3)
        and dtype uint8"), or ``compact`` for drawings ("array (32, 32, 3) uint8")."""
        where = "" if self.device == "cpu" else f" on {self.device}"
        if compact:
            return f"{'array' if self.jit else 'tensor'} {self.shape} {str(self.dtype).replace('torch.', '')}{where}"
        return f"{'an array' if self.jit else 'a tensor'} of shape {self.shape} and dtype {self.dtype}{where}"


@dataclasses.dataclass(frozen=True)
class Allocation:
    """Memory an operation needs for its output, per sample.

    The compiler turns each allocation into one buffer of shape
    ``(slots, batch_size, *shape)``, made once before the first batch.

    An allocation with a ``name`` is a named output of its operation:
    besides the operation's value (its first allocation), other nodes read
    it by name (``RefNode(pipeline, op, output=name)``, or
    ``EmitContext.output`` in a custom node), so that no reader depends on
    the order in which an operation lists its allocations.
    """

    shape: tuple[int, ...]
    dtype: Any
    device: str = "cpu"
    name: str | None = None

    def __post_init__(self) -> None:
        _normalize_fields(self)

    @property
    def nbytes(self) -> int:
        """Bytes per sample."""
        itemsize = self.dtype.itemsize
        return int(np.prod(self.shape, dtype=np.int64)) * itemsize
