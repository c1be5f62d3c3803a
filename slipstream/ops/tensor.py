"""Torch-side operations: element-type conversion and device moves.

They run in a torch stage, in Python over whole-batch torch tensors (their
class sets ``kind = Kind.TORCH``; the compiler places them without being told).
torch is imported when one of them is made, not when this module is, so
that a pipeline without torch-side operations starts without paying for it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

from slipstream.compiler.kinds import Kind
from slipstream.compiler.operation import Declared, Operation, torch_device, torch_dtype
from slipstream.compiler.state import State


@dataclasses.dataclass(frozen=True)
class Convert(Operation):
    """Cast the batch to ``dtype`` (a ``torch.dtype``, or a NumPy dtype that
    torch has), values unchanged as ``Tensor.to(dtype)`` does: no scaling.

    Example: ``Convert(torch.float32)`` after a uint8 crop.
    """

    dtype: Any
    kind: ClassVar[Kind] = Kind.TORCH

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", torch_dtype(self.dtype))

    def declare(self, state: State) -> Declared:
        return State(shape=state.shape, dtype=self.dtype, device=state.device), None

    def generate_code(self) -> Callable[[Any], Any]:
        dtype = self.dtype

        def convert(x: Any) -> Any:
            return x.to(dtype)

        return convert


@dataclasses.dataclass(frozen=True)
class ToDevice(Operation):
    """Move the batch to ``device`` (e.g. ``"cuda"``, ``"cuda:1"``), checked
    when the operation is made: a device this machine lacks raises
    :class:`slipstream.ArgumentError` here, not at the first batch.

    With ``non_blocking=True`` (the default) a copy from pinned host memory
    is queued on the current CUDA stream and the call returns at once; the
    compiled pipeline waits for that copy before it writes the same host
    memory again, ``slots`` calls later, so the copy never reads a later
    batch.
    """

    device: Any
    non_blocking: bool = True
    kind: ClassVar[Kind] = Kind.TORCH

    def __post_init__(self) -> None:
        object.__setattr__(self, "device", torch_device(self.device))

    def declare(self, state: State) -> Declared:
        return State(shape=state.shape, dtype=torch_dtype(state.dtype), device=str(self.device)), None

    def generate_code(self) -> Callable[[Any], Any]:
        device, non_blocking = self.device, self.non_blocking

        def to_device(x: Any) -> Any:
            return x.to(device, non_blocking=non_blocking)

        return to_device
