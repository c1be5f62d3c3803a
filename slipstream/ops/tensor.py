"""Torch-side operations: element-type conversion and device moves.

They run in a torch stage, in Python over whole-batch torch tensors (their
class sets ``kind = Kind.TORCH``; the compiler places them without being told).
torch is imported when one of them is made, not when this module is, so
that a pipeline without torch-side operations starts without paying for it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from slipstream.compiler.kinds import Geometry, Kind
from slipstream.compiler.operation import Declared, Operation, torch_device, torch_dtype
from slipstream.compiler.params import Bool, Custom, Refused, param
from slipstream.compiler.state import State


def _torch_dtype(value: Any) -> Any:
    """A torch dtype, or a NumPy dtype torch has (or its name), as the
    ``torch.dtype`` it is (imports torch)."""
    import torch

    if not isinstance(value, (torch.dtype, np.dtype, str, type)):
        raise Refused()
    try:
        return torch_dtype(value)
    except (TypeError, ValueError):
        raise Refused() from None


TORCH_DTYPE = Custom(_torch_dtype, "a torch dtype, or a NumPy dtype torch has (or its name)",
                     bad=(None, True, 3, math.nan, "pixels", "O", object), good="float32")
"""The element type of a batch tensor."""


def _device(value: Any) -> Any:
    """A device this machine has, as a ``torch.device`` (imports torch;
    :func:`~slipstream.compiler.operation.torch_device` says what it lacks)."""
    if isinstance(value, (bool, np.bool_)):
        raise Refused()
    return torch_device(value)


DEVICE = Custom(_device, 'a torch device this machine has (a `torch.device`, or its name: `"cuda"`, `"cuda:1"`)',
                bad=("gpu0", "CPU", -1, math.nan, True, None, [1.0]), good="cpu")
"""Where a batch goes: a device this machine has, checked when the operation is made."""


@dataclasses.dataclass(frozen=True)
class Convert(Operation):
    """Cast the batch to ``dtype`` (a ``torch.dtype``, or a NumPy dtype that
    torch has), values unchanged as ``Tensor.to(dtype)`` does: no scaling.

    Example: ``Convert(torch.float32)`` after a uint8 crop.
    """

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    dtype: Any = param(TORCH_DTYPE, "element type of the batch tensor", structural=True)
    kind: ClassVar[Kind] = Kind.TORCH

    def declare(self, state: State) -> Declared:
        return State(shape=state.shape, dtype=self.dtype, device=state.device), None

    def generate_code(self) -> Callable[[Any], Any]:
        dtype = self.dtype

        def convert(x: Any, values: tuple[()]) -> Any:
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

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    device: Any = param(DEVICE, "where the batch goes", structural=True)
    non_blocking: bool = param(Bool(), "queue the copy on the current CUDA stream and return at once", default=True)
    kind: ClassVar[Kind] = Kind.TORCH

    def declare(self, state: State) -> Declared:
        return State(shape=state.shape, dtype=torch_dtype(state.dtype), device=str(self.device)), None

    def generate_code(self) -> Callable[[Any], Any]:
        device = self.device

        def to_device(x: Any, values: tuple[bool]) -> Any:
            (non_blocking,) = values
            return x.to(device, non_blocking=non_blocking)

        return to_device
