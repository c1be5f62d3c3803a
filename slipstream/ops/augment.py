"""Per-sample augmentations on (height, width, channels) uint8 images,
fused into the stage's sample loop.  Pixel loops index flat views with
unsigned integers so that LLVM vectorizes them (see
:mod:`slipstream.compiler.operation`)."""

from __future__ import annotations

import dataclasses

import numpy as np
from numba import uint64

from slipstream.compiler import Allocation, Operation, State
from slipstream.compiler import random as rnd


def _check_image(op: Operation, state: State) -> None:
    if len(state.shape) != 3 or state.dtype != np.uint8:
        raise ValueError(f"{type(op).__name__} takes (height, width, channels) uint8 images, got "
                         f"{state.shape} {state.dtype}")


@dataclasses.dataclass(frozen=True)
class RandomHorizontalFlip(Operation):
    """Mirror left-right with probability ``p``.  Directly after a decoding
    crop it costs nothing: the loader folds it into the decode call."""

    p: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= self.p <= 1.0:
            raise ValueError(f"p must lie in [0, 1], got {self.p}")

    def declare(self, state):
        _check_image(self, state)
        return state, Allocation(state.shape, state.dtype)

    def generate_code(self):
        p, one = self.p, uint64(1)

        def flip(x, out, key):
            if not rnd.uniform(key, 0) < p:
                return x
            height, width, channels = uint64(x.shape[0]), uint64(x.shape[1]), uint64(x.shape[2])
            src, dst = x.reshape(-1), out.reshape(-1)
            row = width * channels
            for r in range(height):
                base = r * row
                for c in range(width):
                    s, d = base + (width - one - c) * channels, base + c * channels
                    for k in range(channels):
                        dst[d + k] = src[s + k]
            return out

        return flip


@dataclasses.dataclass(frozen=True)
class RandomVerticalFlip(Operation):
    """Mirror top-bottom with probability ``p``."""

    p: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= self.p <= 1.0:
            raise ValueError(f"p must lie in [0, 1], got {self.p}")

    def declare(self, state):
        _check_image(self, state)
        return state, Allocation(state.shape, state.dtype)

    def generate_code(self):
        p, one = self.p, uint64(1)

        def flip(x, out, key):
            if not rnd.uniform(key, 0) < p:
                return x
            height = uint64(x.shape[0])
            row = uint64(x.shape[1] * x.shape[2])
            src, dst = x.reshape(-1), out.reshape(-1)
            for r in range(height):
                s, d = (height - one - r) * row, r * row
                for j in range(row):
                    dst[d + j] = src[s + j]
            return out

        return flip
