"""What every torch batch augmentation shares (see :mod:`slipstream.ops.batch`
for their use): the base class that separates drawing per-image parameters
from applying them, the named random draws from the pipeline's keys or
from a ``torch.Generator``, and the conversions of uint8 batches to floats
in [0, 1] and to 8-bit levels and back.

Its users are :mod:`slipstream.ops.batch`, :mod:`slipstream.ops.batch_warps`
and :mod:`slipstream.ops.batch_tones`; import the augmentations from
:mod:`slipstream.ops.batch`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from slipstream.compiler import random as rnd
from slipstream.compiler.operation import DeclaresGeometry, TakesKeys
from slipstream.errors import ArgumentError
from slipstream.ops.augment import LUMA, _check_probability, _is_number

Params = dict[str, torch.Tensor]


def _checked(x: torch.Tensor) -> torch.Tensor:
    """``x`` itself, refused unless it is a 4-dimensional float or uint8 tensor."""
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ArgumentError(f"batch augmentations take (batch, channels, height, width) tensors, got {shape}")
    if x.dtype != torch.uint8 and not x.is_floating_point():
        raise ArgumentError(f"batch augmentations take float or uint8 tensors, got {x.dtype}")
    return x


def _float(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """The batch as floats in [0, 1] (a uint8 batch divided by 255), and whether it was uint8."""
    if _checked(x).dtype == torch.uint8:
        return x.float() / 255.0, True
    return x, False


def _back(x: torch.Tensor, was_uint8: bool) -> torch.Tensor:
    """A float result in [0, 1] as the input's kind: rounded to uint8 when the input was uint8."""
    return (x * 255.0).round().clamp(0, 255).to(torch.uint8) if was_uint8 else x


def _levels(x: torch.Tensor) -> torch.Tensor:
    """The batch as 8-bit levels, uint8: a float batch in [0, 1] times 255,
    rounded (exact for the values ``ToTensor`` makes, ``v / 255``)."""
    if _checked(x).dtype == torch.uint8:
        return x
    return (x.float() * 255.0).round().clamp(0, 255).to(torch.uint8)


def _from_levels(levels: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """uint8 ``levels`` in the kind of batch ``like`` is: as they are for
    uint8, divided by 255 in ``like``'s float dtype otherwise."""
    return levels if like.dtype == torch.uint8 else (levels.float() / 255.0).to(like.dtype)


def _where(apply: torch.Tensor, changed: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``changed`` for the images whose ``apply`` flag is set, ``x`` for the others."""
    return torch.where(apply.view(-1, 1, 1, 1), changed, x)


def _numbers(value: Any) -> tuple[Any, ...]:
    """A number as a 1-tuple, any other iterable as a tuple of its items,
    anything else as ``()``: the forms of an argument that takes a number or
    several, for the caller to check."""
    if _is_number(value):
        return (value,)
    return tuple(value) if isinstance(value, (tuple, list)) else ()


COIN_DRAWS = rnd.named_draws("apply")
"""The draw of an augmentation applied with probability ``p``, named as the
compiled operations name theirs, so that a batch one draws as its compiled
twin does."""


def _probability(p: Any) -> float:
    """``p`` as a float, refused unless it is a number in [0, 1]."""
    _check_probability(p)
    return float(p)


class _Draws:
    """The random numbers of one batch: draw ``k`` (a named draw's number,
    :func:`slipstream.compiler.random.named_draws`) gives one value per
    image.  From the pipeline's per-sample ``keys`` when given (the k-th
    draw of each sample's key, :func:`slipstream.compiler.random.uniforms`),
    else from ``generator`` (torch's global generator when None), in order
    of the calls."""

    def __init__(self, like: torch.Tensor, generator: torch.Generator | None, keys: np.ndarray | None) -> None:
        self.like, self.generator = like, generator
        self.keys = None if keys is None else np.ascontiguousarray(keys[:like.shape[0]], np.uint64)

    def rand(self, k: int) -> torch.Tensor:
        """Values in [0, 1), one per image: float64 from keys, float32 from a generator."""
        if self.keys is None:
            return torch.rand(self.like.shape[0], device=self.like.device, generator=self.generator)
        return torch.from_numpy(rnd.uniforms(self.keys, k)).to(self.like.device)

    def uniform(self, k: int, low: float, high: float) -> torch.Tensor:
        """Values in [low, high), one per image, in a float batch's own dtype
        (so that applying them keeps it: a float16 batch stays float16)."""
        values = low + (high - low) * self.rand(k).float()
        return values.to(self.like.dtype) if self.like.is_floating_point() else values

    def uniform64(self, k: int, low: float, high: float) -> torch.Tensor:
        """Values in [low, high), one per image, in float64 whatever the
        batch's dtype: the parameters of geometric maps, computed as the
        compiled operations compute them from the same keys
        (:func:`slipstream.compiler.random.uniform_range`)."""
        return low + (high - low) * self.rand(k).double()

    def integers(self, k: int, low: int, high: int) -> torch.Tensor:
        """Integers in [low, high), int64, one per image, as
        :func:`slipstream.compiler.random.integers` draws them from a key."""
        return low + (self.rand(k).double() * (high - low)).long()

    def rows(self, k: int, count: int) -> torch.Tensor:
        """(images, count) values in [0, 1): draws k .. k + count - 1 of each image."""
        if self.keys is None:
            return torch.rand(self.like.shape[0], count, device=self.like.device, generator=self.generator)
        columns = [rnd.uniforms(self.keys, k + j) for j in range(count)]
        return torch.from_numpy(np.stack(columns, 1)).to(self.like.device)

    def permutation(self, k: int, size: int) -> torch.Tensor:
        """A permutation of ``range(size)`` for the whole batch (from the first
        image's key: draws k .. k + size - 1)."""
        if self.keys is None:
            return torch.randperm(size, device=self.like.device, generator=self.generator)
        first = np.repeat(self.keys[:1], size)
        ranks = np.array([rnd.uniform(first[j], k + j) for j in range(size)])
        return torch.from_numpy(np.argsort(ranks, kind="stable")).to(self.like.device)


def _gray(x: torch.Tensor) -> torch.Tensor:
    """(B, 1, H, W) luma with torchvision's weights."""
    r, g, b = x.unbind(1)
    return (LUMA[0] * r + LUMA[1] * g + LUMA[2] * b).unsqueeze(1)


class _BatchAugmentation(torch.nn.Module, TakesKeys, DeclaresGeometry):
    """A torch batch augmentation: parameters drawn per image from the
    samples' keys (:meth:`sample`), then applied (:meth:`apply`); each
    class declares how it moves pixels in ``geometry``."""

    def __init__(self, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.generator = generator

    def sample(self, x: torch.Tensor, keys: np.ndarray | None = None) -> Params:
        """Per-image parameters for the batch ``x``, drawn from the samples'
        random ``keys`` when given (in a pipeline), else from ``generator``."""
        return self.draw(_checked(x), _Draws(x, self.generator, keys))

    def draw(self, x: torch.Tensor, draws: _Draws) -> Params:
        """The per-image parameters of the checked batch ``x``, from the
        numbered ``draws`` (draw k gives one value per image)."""
        raise NotImplementedError

    def apply(self, x: torch.Tensor, params: Params) -> torch.Tensor:
        """The batch ``x`` augmented with ``params`` (from :meth:`sample`,
        possibly of another view of the same images), in ``x``'s dtype."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor, keys: np.ndarray | None = None) -> torch.Tensor:
        """``apply(x, sample(x, keys))``."""
        return self.apply(x, self.sample(x, keys))


class _Chance(_BatchAugmentation):
    """An augmentation applied to each image with probability ``p`` (draw
    ``apply`` of its key, as the compiled operation of the same name draws it), with
    no other parameter: subclasses give :meth:`change`, the whole batch
    changed."""

    def __init__(self, p: float = 0.5, generator: torch.Generator | None = None) -> None:
        super().__init__(generator)
        self.p = _probability(p)

    def draw(self, x: torch.Tensor, draws: _Draws) -> Params:
        return {"apply": draws.rand(COIN_DRAWS.apply) < self.p}

    def change(self, x: torch.Tensor) -> torch.Tensor:
        """Every image of ``x`` changed, in ``x``'s dtype."""
        raise NotImplementedError

    def apply(self, x: torch.Tensor, params: Params) -> torch.Tensor:
        return _where(params["apply"], self.change(_checked(x)), x)
