"""``AugMix`` (Hendrycks et al., "AugMix: A Simple Data Processing Method to
Improve Robustness and Uncertainty", ICLR 2020), as torchvision's
``AugMix`` defines it (``torchvision/transforms/autoaugment.py``:
``AugMix._augmentation_space`` and ``forward``), drawn per sample inside
the compiled loop.

Per sample: ``mixture_width`` chains, each of ``chain_depth`` steps (or 1
to 3, uniformly), each step a primitive of the augmentation space chosen
uniformly at a magnitude bin drawn uniformly from ``[0, severity)`` of 10,
negated half of the time where the primitive is signed.  The chains are
mixed with the original in float32, ``m * x + sum_i w_i * chain_i`` with
``m ~ Beta(alpha, alpha)`` and ``w ~ Dirichlet(alpha, ..., alpha) * (1 -
m)``, and the mixture is truncated to uint8 (torch's ``.to(torch.uint8)``,
which torchvision's ``forward`` ends with).

Each step computes Pillow's pixels (:func:`slipstream.ops.policies.apply_primitive`,
the primitives of the other policies).  That is the one difference from
torchvision, whose ``AugMix`` converts a PIL image to a tensor first and
runs its steps with the tensor kernels even on PIL input (so its posterize
to 0 bits gives black, as here, where Pillow would refuse 0).

The draws come from the sample's counter-based key
(:mod:`slipstream.compiler.random`), by a fixed plan of named draws, so
that a batch is the same whatever the thread count or resume point:

* draws ``original`` and ``shared`` (as Gamma sub-keys): ``g0, g1 ~
  Gamma(alpha)``; the original's weight is ``m = g0 / (g0 + g1)``, the
  chains share ``g1 / (g0 + g1)``;
* draw ``weight + i`` (a Gamma sub-key): ``h_i ~ Gamma(alpha)``; chain
  ``i`` weighs ``h_i / sum(h) * g1 / (g0 + g1)`` (float32 product);
* draw ``chain + i``: the sub-key ``c`` of chain ``i``, whose draw
  ``depth`` is its depth (when ``chain_depth <= 0``) and draws
  ``primitive + s``, ``bin + s``, ``sign + s`` step ``s``'s primitive, bin
  and sign.

Each ratio is computed as torch's Dirichlet sampler computes it
(``_s_dirichlet_cpu`` in ``aten/src/ATen/native/Distributions.cpp``): the
Gamma values at least the smallest normal float64, so that no weight is 0 /
0 at small ``alpha``, summed in float64, each ratio cast to float32 and
clamped to [the smallest normal float32, the largest float32 below 1].

AugMix is not geometric: its output is a mixture of differently warped
images, which no single map describes, so it declares no ``transform``
output and boxes, keypoints and masks cannot follow it: it is
``Geometry.UNTRACKED`` (:class:`slipstream.compiler.Geometry`), so a
pipeline that asks them to is refused.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
from numba import uint64

from slipstream.compiler import Allocation, Geometry, Operation, State
from slipstream.compiler import random as rnd
from slipstream.compiler.jit import cached_njit
from slipstream.compiler.params import Bool, Float, Int, param
from slipstream.fields import geometry
from slipstream.ops import policies
from slipstream.ops.policies import Primitive

BINS = 10
"""Magnitudes per primitive: torchvision's ``AugMix._PARAMETER_MAX``, and the
largest ``severity``."""

MAX_CHAINS = 32
"""The most chains a sample mixes (``mixture_width``)."""

MAX_DEPTH = 16
"""The most steps of a chain (``chain_depth``)."""

_DRAWS = rnd.named_draws("original", "shared", "weight", "chain")
_CHAIN_DRAWS = rnd.named_draws("depth", "primitive", "bin", "sign")  # a chain's sub-key's
_TINY = float(np.finfo(np.float64).tiny)
_TINY32, _BELOW_ONE32 = np.finfo(np.float32).tiny, np.nextafter(np.float32(1), np.float32(0))


def augmix_space(all_ops: bool) -> tuple[np.ndarray, ...]:
    """AugMix's augmentation space (torchvision's ``_augmentation_space``
    with 10 bins), compiled (:meth:`slipstream.ops.policies.Space.compiled`):
    shears to 0.3, translations to a third of the width or height, rotations
    to 30 degrees, posterize ``4 - round(i / (9 / 4))`` bits, solarize 255 to
    0, autocontrast, equalize and, with ``all_ops``, brightness, color,
    contrast and sharpness to 0.9."""
    rows: list[tuple[str, float, Any, bool]] = [
        ("ShearX", 0, 0.3, True), ("ShearY", 0, 0.3, True), ("TranslateX", 0, ("width", 1.0 / 3.0), True),
        ("TranslateY", 0, ("height", 1.0 / 3.0), True), ("Rotate", 0, 30.0, True), ("Posterize", 0, 0, False),
        ("Solarize", 255.0, 0.0, False), ("AutoContrast", 0, 0, False), ("Equalize", 0, 0, False)]
    if all_ops:
        rows += [("Brightness", 0, 0.9, True), ("Color", 0, 0.9, True), ("Contrast", 0, 0.9, True),
                 ("Sharpness", 0, 0.9, True)]
    space = policies.make_space(rows, BINS, posterize_steps=4)
    compiled = space.compiled()
    # The space's posterize bits count down from 8 (the other policies'); AugMix's from 4.
    compiled[5][space.ops.index(Primitive.POSTERIZE)] -= 4
    return compiled


# ---------------------------------------------------------------- per sample, compiled


@cached_njit
def _gamma(key, k, alpha):
    """A Gamma(alpha) value from sub-key ``k``, at least the smallest normal float64."""
    return max(rnd.gamma(key, k, alpha), _TINY)


@cached_njit
def _ratio(part, total):
    """``part / total`` as torch's Dirichlet sampler returns it: float32, in
    [the smallest normal float32, the largest float32 below 1]."""
    return min(max(np.float32(part / total), _TINY32), _BELOW_ONE32)


@cached_njit
def augmix_draw(key, space, severity, chain_depth, alpha, height, width, weights, depths, ops, magnitudes):
    """One sample's draws, by the plan of the module docstring: the float32
    ``weights`` of the original (``weights[0]``) and of each chain, each
    chain's depth in ``depths``, and its steps in the rows of ``ops`` and
    ``magnitudes`` (``chain_depth`` or 3 columns)."""
    chains = depths.size
    g0, g1 = _gamma(key, _DRAWS.original, alpha), _gamma(key, _DRAWS.shared, alpha)
    weights[0] = _ratio(g0, g0 + g1)
    share = _ratio(g1, g0 + g1)
    total = 0.0
    for i in range(chains):
        total += _gamma(key, _DRAWS.weight + i, alpha)
    for i in range(chains):
        weights[1 + i] = _ratio(_gamma(key, _DRAWS.weight + i, alpha), total) * share
    count = space[0].size
    for i in range(chains):
        chain = rnd.draw(key, _DRAWS.chain + i)
        depths[i] = chain_depth if chain_depth > 0 else rnd.integers(chain, _CHAIN_DRAWS.depth, 1, 4)
        for s in range(depths[i]):
            row = rnd.integers(chain, _CHAIN_DRAWS.primitive + s, 0, count)
            b = rnd.integers(chain, _CHAIN_DRAWS.bin + s, 0, severity)
            ops[i, s] = space[0][row]
            sign = rnd.uniform(chain, _CHAIN_DRAWS.sign + s)
            magnitudes[i, s] = policies.drawn_magnitude(space, row, b, sign, height, width)


@cached_njit
def _start_mix(mix, x, weight):
    """``mix = weight * x`` in float32."""
    m, s = mix.reshape(-1), x.reshape(-1)
    for j in range(uint64(m.size)):
        m[j] = weight * np.float32(s[j])


@cached_njit
def _add_chain(mix, chain, weight):
    """``mix += weight * chain`` in float32 (a product, then a sum, each
    rounded, as torch's ``mix.add_(w * aug)``)."""
    m, s = mix.reshape(-1), chain.reshape(-1)
    for j in range(uint64(m.size)):
        m[j] = m[j] + weight * np.float32(s[j])


@cached_njit
def _truncate(mix, out):
    """``out = mix.to(torch.uint8)``: toward zero (the mixture lies in [0, 255])."""
    m, o = mix.reshape(-1), out.reshape(-1)
    for j in range(uint64(m.size)):
        o[j] = np.uint8(m[j])


# ---------------------------------------------------------------- the operation


@dataclasses.dataclass(frozen=True)
class AugMix(Operation):
    """torchvision's ``AugMix`` (Hendrycks et al., ICLR 2020): per sample,
    ``mixture_width`` chains of 1 to 3 (or ``chain_depth``) primitives, each
    chosen uniformly at a magnitude bin drawn from ``[0, severity)``, mixed
    with the original by Beta and Dirichlet weights (see the module
    docstring for the draws).

    Each step computes Pillow's pixels, as the other policies' steps do;
    torchvision runs AugMix's steps with its tensor kernels even on PIL
    images, which is the one difference.  AugMix is not geometric (a
    mixture of differently warped images has no single map): boxes,
    keypoints and masks cannot follow it.

    Args:
        severity: the bins magnitudes are drawn from, 1 to 10.
        mixture_width: chains mixed per sample, 1 to 32.
        chain_depth: steps per chain, at most 16; 0 or negative: 1 to 3,
            uniformly.
        alpha: the Beta and Dirichlet concentration, a finite number > 0.
        all_ops: include brightness, color, contrast and sharpness.
        interpolation: ``"bilinear"`` (torchvision's default for AugMix) or
            ``"nearest"``, for the geometric steps.
        fill: the colour of uncovered pixels: None (black), a number, or 3.
    """

    geometry: ClassVar[Geometry] = Geometry.UNTRACKED

    severity: int = param(Int(1, BINS), "magnitude bins drawn from: each step takes one of the first `severity` "
                          "of 10 bins uniformly", default=3)
    mixture_width: int = param(Int(1, MAX_CHAINS), "chains mixed per sample", default=3)
    chain_depth: int = param(Int(None, MAX_DEPTH), "steps per chain; 0 or negative: 1 to 3, uniformly per chain",
                             default=-1)
    alpha: float = param(Float(0.0, low_open=True), "the concentration of the Beta and Dirichlet weights",
                         default=1.0)
    all_ops: bool = param(Bool(), "also draw Brightness, Color, Contrast and Sharpness", default=True)
    interpolation: Any = param(policies.POLICY_INTERPOLATION, "for the geometric steps", default="bilinear",
                               structural=True)
    fill: Any = param(policies.FILL, "the colour of uncovered pixels", default=None)

    def declare(self, state: State) -> Any:
        if len(state.shape) != 3 or state.shape[2] != 3 or state.dtype != np.uint8:
            raise ValueError(f"AugMix takes (height, width, 3) uint8 images, got {state.shape} {state.dtype}")
        image = Allocation(state.shape, state.dtype)
        # the result, a chain and its scratch image, the float32 mixture, a scratch transform for the steps
        return state, [image, image, image, Allocation(state.shape, np.float32),
                       Allocation((geometry.SIZE,), np.float64)]

    def runtime_values(self) -> tuple[Any, ...]:
        """The space, severity, chains, depth, alpha and the fill's RGB."""
        return (augmix_space(self.all_ops), self.severity, self.mixture_width, self.chain_depth, self.alpha,
                policies.fill_color(self.fill))

    def generate_code(self):
        nearest = self.interpolation == "nearest"
        apply_steps = policies.steps_applier(policies.apply_primitive)

        def augmix(x, out, chain, scratch, mix, transform, key, values):
            space, severity, chains, depth, alpha, fill = values
            columns = depth if depth > 0 else 3
            weights, depths = np.empty(chains + 1, np.float32), np.empty(chains, np.int64)
            ops, magnitudes = np.empty((chains, columns), np.int64), np.empty((chains, columns))
            augmix_draw(key, space, severity, depth, alpha, x.shape[0], x.shape[1], weights, depths, ops, magnitudes)
            _start_mix(mix, x, weights[0])
            for i in range(chains):
                apply_steps(x, chain, scratch, transform, ops[i], magnitudes[i], depths[i], fill, nearest)
                _add_chain(mix, chain, weights[1 + i])
            _truncate(mix, out)
            return out

        return augmix
