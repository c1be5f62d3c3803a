"""What flows along a pipeline: the state of each node's output, and the
memory an operation asks for."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import numpy as np


def _normalize_dtype(dtype: Any) -> Any:
    """NumPy dtypes are kept as ``np.dtype``; torch dtypes stay as they are."""
    torch = sys.modules.get("torch")  # a torch dtype exists only once torch is imported
    if torch is not None and isinstance(dtype, torch.dtype):
        return dtype
    return np.dtype(dtype)


def _normalize_fields(obj: Any) -> None:
    """Canonical shape (a tuple of ints, none negative) and dtype of a frozen
    State or Allocation, so that equal descriptions compare equal."""
    object.__setattr__(obj, "shape", tuple(int(s) for s in obj.shape))
    object.__setattr__(obj, "dtype", _normalize_dtype(obj.dtype))
    if any(s < 0 for s in obj.shape):
        raise ValueError(f"shape {obj.shape} has a negative dimension")


@dataclasses.dataclass(frozen=True, init=False)
class State:
    """The output of a pipeline node, per sample.

    Whether the value is a NumPy array (made by compiled code) or a torch
    tensor follows from the kind of the operation that makes it
    (:class:`~slipstream.compiler.Kind`), not from the state.

    Attributes:
        shape: per-sample shape (the batch dimension is not included).
        dtype: a NumPy dtype for the values of compiled code, a torch dtype
            for those of torch operations.
        device: where the value lives: ``"cpu"`` or a torch device string.
    """

    shape: tuple[int, ...]
    dtype: Any
    device: str = "cpu"

    def __init__(self, shape: tuple[int, ...], dtype: Any, device: str = "cpu") -> None:
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "device", device)
        _normalize_fields(self)

    @property
    def tensor(self) -> bool:
        """Whether the value is a torch tensor (its dtype is a torch dtype)."""
        return not isinstance(self.dtype, np.dtype)

    def replace(self, **changes: Any) -> State:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def describe(self, compact: bool = False) -> str:
        """The state in words, for messages ("an array of shape (32, 32, 3)
        and dtype uint8"), or ``compact`` for drawings ("array (32, 32, 3) uint8")."""
        where = "" if self.device == "cpu" else f" on {self.device}"
        if compact:
            return f"{'tensor' if self.tensor else 'array'} {self.shape} {str(self.dtype).replace('torch.', '')}{where}"
        return f"{'a tensor' if self.tensor else 'an array'} of shape {self.shape} and dtype {self.dtype}{where}"


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
