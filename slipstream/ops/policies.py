"""Automatic augmentation policies, chosen per sample inside the compiled
loop: ``TrivialAugmentWide``, ``RandAugment`` and ``AutoAugment``.

Each policy draws, from the sample's counter-based key, which primitive
operations to apply and at what magnitude, then applies each with one call
of the C kernel ``slip_policy_step``, which builds a geometric step's
matrix as torchvision does and computes the pixels as Pillow does (the
kernels of :mod:`slipstream.ops.tones` and :mod:`slipstream.ops.warps`).  Together they follow torchvision's
PIL path (``torchvision/transforms/autoaugment.py``: ``_apply_op``, the
classes' ``_augmentation_space`` tables and ``forward`` draws; the
AutoAugment sub-policies are those of Cubuk et al., "AutoAugment: Learning
Augmentation Strategies from Data", CVPR 2019, as torchvision lists them).

Magnitude tables are computed as torchvision computes them (float32
``torch.linspace``, posterize bits rounded half to even), so a policy's
magnitudes are torchvision's to the last bit; translations, which scale
with each image, give torchvision's whole-pixel shifts.  The draws are slipstream's:
the same distributions, from the counter-based key instead of torch's
generator, so that a batch is the same whatever the thread count, batch
order or resume point.

The policies are geometric (``Geometry.MAPPED``, :mod:`slipstream.fields.geometry`):
their ``transform`` output composes the shears, translations and rotations
a sample received, so boxes, keypoints and masks follow them.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from slipstream.compiler import Allocation, Geometry, Operation, State
from slipstream.compiler import random as rnd
from slipstream.compiler.codegen import copy_sample
from slipstream.compiler.jit import cached_njit, uncached_njit
from slipstream.compiler.params import Choice, Custom, Int, Refused, enum_name, param
from slipstream.errors import ArgumentError
from slipstream.fields import geometry
from slipstream.native import Primitive, slip_policy_step
from slipstream.ops import warps
from slipstream.ops.warps import image_bytes


NAMES = {"Identity": Primitive.IDENTITY, "ShearX": Primitive.SHEAR_X, "ShearY": Primitive.SHEAR_Y,
         "TranslateX": Primitive.TRANSLATE_X, "TranslateY": Primitive.TRANSLATE_Y, "Rotate": Primitive.ROTATE,
         "Brightness": Primitive.BRIGHTNESS, "Color": Primitive.COLOR, "Contrast": Primitive.CONTRAST,
         "Sharpness": Primitive.SHARPNESS, "Posterize": Primitive.POSTERIZE, "Solarize": Primitive.SOLARIZE,
         "AutoContrast": Primitive.AUTOCONTRAST, "Equalize": Primitive.EQUALIZE, "Invert": Primitive.INVERT}
"""torchvision's operation names (``_apply_op``) and their primitives."""

_GEOMETRIC = (Primitive.SHEAR_X, Primitive.SHEAR_Y, Primitive.TRANSLATE_X, Primitive.TRANSLATE_Y, Primitive.ROTATE)

_WIDTH, _HEIGHT = -1.0, -2.0
_TRIVIAL_DRAWS = rnd.named_draws("primitive", "bin", "sign")
_RAND_DRAWS = rnd.named_draws("primitive", "sign")  # step s: primitive + s, sign + s
_AUTO_DRAWS = rnd.named_draws("policy", "apply", "sign")  # step s: apply + s, sign + s
"""Markers in a magnitude table's ``end`` column: the range ends at a
fraction (the ``scale`` column) of the image's width or height, which is
known only per sample."""


@dataclasses.dataclass(frozen=True)
class Space:
    """A policy's augmentation space: per operation, ``bins`` magnitudes from
    ``start`` to ``end`` (float32 ``torch.linspace``, or ``bits`` for
    posterize) and whether a draw may negate them.

    Attributes:
        ops: the primitives, in torchvision's order.
        starts, ends: each operation's magnitude range; an ``end`` of
            ``_WIDTH`` or ``_HEIGHT`` is ``scale`` times the image's width
            or height.
        scales: see ``ends``.
        signed: whether a draw negates the magnitude half of the time.
        posterize_steps: posterize's bits are ``8 - round(i / ((bins - 1) /
            posterize_steps))`` for bin ``i``.
        bins: magnitudes per operation; operations without a magnitude
            (``Identity``, ``AutoContrast``, ...) have magnitude 0.
    """

    ops: tuple[int, ...]
    starts: tuple[float, ...]
    ends: tuple[float, ...]
    scales: tuple[float, ...]
    signed: tuple[bool, ...]
    posterize_steps: float
    bins: int

    def compiled(self) -> tuple[np.ndarray, ...]:
        """The space as compiled code takes it: the arrays ops, signed,
        starts, ends, scales, and the magnitude table of the size-independent
        operations (float32 values as torchvision has them, NaN where the
        image size decides)."""
        table = np.full((len(self.ops), self.bins), np.nan)
        for row, (op, start, end) in enumerate(zip(self.ops, self.starts, self.ends)):
            if op == Primitive.POSTERIZE:
                table[row] = _posterize_bits(self.bins, self.posterize_steps)
            elif end >= 0:
                table[row] = _linspace32(start, end, self.bins)
        return (np.array(self.ops, np.int64), np.array(self.signed), np.array(self.starts), np.array(self.ends),
                np.array(self.scales), table)


def _linspace32(start: float, end: float, steps: int) -> np.ndarray:
    """``torch.linspace(start, end, steps)`` (float32), as float64 values."""
    import torch

    return torch.linspace(start, end, steps).double().numpy()


def _posterize_bits(bins: int, steps: float) -> np.ndarray:
    """torchvision's posterize bits: ``8 - (arange(bins) / ((bins - 1) /
    steps)).round().int()`` (float32 division, round half to even)."""
    import torch

    return (8 - (torch.arange(bins) / ((bins - 1) / steps)).round().int()).double().numpy()


def make_space(entries: Sequence[tuple[str, float, float, bool]], bins: int, posterize_steps: float) -> Space:
    """A space from (name, start, end, signed) rows; ``end`` may be
    ``("width", scale)`` or ``("height", scale)``."""
    ends, scales = [], []
    for _, _, end, _ in entries:
        if isinstance(end, tuple):
            ends.append(_WIDTH if end[0] == "width" else _HEIGHT)
            scales.append(float(end[1]))
        else:
            ends.append(float(end))
            scales.append(1.0)
    return Space(ops=tuple(int(NAMES[name]) for name, *_ in entries), starts=tuple(float(e[1]) for e in entries),
                 ends=tuple(ends), scales=tuple(scales), signed=tuple(bool(e[3]) for e in entries),
                 posterize_steps=posterize_steps, bins=bins)


def trivial_augment_space(bins: int) -> Space:
    """TrivialAugmentWide's space (torchvision's ``_augmentation_space``)."""
    return make_space([("Identity", 0, 0, False), ("ShearX", 0, 0.99, True), ("ShearY", 0, 0.99, True),
                   ("TranslateX", 0, 32.0, True), ("TranslateY", 0, 32.0, True), ("Rotate", 0, 135.0, True),
                   ("Brightness", 0, 0.99, True), ("Color", 0, 0.99, True), ("Contrast", 0, 0.99, True),
                   ("Sharpness", 0, 0.99, True), ("Posterize", 0, 0, False), ("Solarize", 255.0, 0.0, False),
                   ("AutoContrast", 0, 0, False), ("Equalize", 0, 0, False)], bins, posterize_steps=6)


def _randaugment_rows(identity: bool, invert: bool) -> list[tuple[str, float, Any, bool]]:
    """The rows RandAugment and AutoAugment share (torchvision's tables:
    shears to 0.3, translations to 150/331 of the size, rotations to 30
    degrees, enhancements to 0.9)."""
    rows: list[tuple[str, float, Any, bool]] = [("Identity", 0, 0, False)] if identity else []
    rows += [("ShearX", 0, 0.3, True), ("ShearY", 0, 0.3, True),
             ("TranslateX", 0, ("width", 150.0 / 331.0), True), ("TranslateY", 0, ("height", 150.0 / 331.0), True),
             ("Rotate", 0, 30.0, True), ("Brightness", 0, 0.9, True), ("Color", 0, 0.9, True),
             ("Contrast", 0, 0.9, True), ("Sharpness", 0, 0.9, True), ("Posterize", 0, 0, False),
             ("Solarize", 255.0, 0.0, False), ("AutoContrast", 0, 0, False), ("Equalize", 0, 0, False)]
    return rows + ([("Invert", 0, 0, False)] if invert else [])


def rand_augment_space(bins: int) -> Space:
    """RandAugment's space (torchvision's ``_augmentation_space``)."""
    return make_space(_randaugment_rows(identity=True, invert=False), bins, posterize_steps=4)


def auto_augment_space() -> Space:
    """AutoAugment's space: 10 bins (torchvision's ``_augmentation_space``)."""
    return make_space(_randaugment_rows(identity=False, invert=True), 10, posterize_steps=4)


AUTO_AUGMENT_POLICIES: dict[str, tuple[tuple[tuple[str, float, int | None], tuple[str, float, int | None]], ...]] = {
    # Cubuk et al. 2019, appendix, as torchvision's AutoAugment._get_policies lists them:
    # each sub-policy is two (operation, probability, magnitude bin) steps.
    "imagenet": (
        (("Posterize", 0.4, 8), ("Rotate", 0.6, 9)), (("Solarize", 0.6, 5), ("AutoContrast", 0.6, None)),
        (("Equalize", 0.8, None), ("Equalize", 0.6, None)), (("Posterize", 0.6, 7), ("Posterize", 0.6, 6)),
        (("Equalize", 0.4, None), ("Solarize", 0.2, 4)), (("Equalize", 0.4, None), ("Rotate", 0.8, 8)),
        (("Solarize", 0.6, 3), ("Equalize", 0.6, None)), (("Posterize", 0.8, 5), ("Equalize", 1.0, None)),
        (("Rotate", 0.2, 3), ("Solarize", 0.6, 8)), (("Equalize", 0.6, None), ("Posterize", 0.4, 6)),
        (("Rotate", 0.8, 8), ("Color", 0.4, 0)), (("Rotate", 0.4, 9), ("Equalize", 0.6, None)),
        (("Equalize", 0.0, None), ("Equalize", 0.8, None)), (("Invert", 0.6, None), ("Equalize", 1.0, None)),
        (("Color", 0.6, 4), ("Contrast", 1.0, 8)), (("Rotate", 0.8, 8), ("Color", 1.0, 2)),
        (("Color", 0.8, 8), ("Solarize", 0.8, 7)), (("Sharpness", 0.4, 7), ("Invert", 0.6, None)),
        (("ShearX", 0.6, 5), ("Equalize", 1.0, None)), (("Color", 0.4, 0), ("Equalize", 0.6, None)),
        (("Equalize", 0.4, None), ("Solarize", 0.2, 4)), (("Solarize", 0.6, 5), ("AutoContrast", 0.6, None)),
        (("Invert", 0.6, None), ("Equalize", 1.0, None)), (("Color", 0.6, 4), ("Contrast", 1.0, 8)),
        (("Equalize", 0.8, None), ("Equalize", 0.6, None)),
    ),
    "cifar10": (
        (("Invert", 0.1, None), ("Contrast", 0.2, 6)), (("Rotate", 0.7, 2), ("TranslateX", 0.3, 9)),
        (("Sharpness", 0.8, 1), ("Sharpness", 0.9, 3)), (("ShearY", 0.5, 8), ("TranslateY", 0.7, 9)),
        (("AutoContrast", 0.5, None), ("Equalize", 0.9, None)), (("ShearY", 0.2, 7), ("Posterize", 0.3, 7)),
        (("Color", 0.4, 3), ("Brightness", 0.6, 7)), (("Sharpness", 0.3, 9), ("Brightness", 0.7, 9)),
        (("Equalize", 0.6, None), ("Equalize", 0.5, None)), (("Contrast", 0.6, 7), ("Sharpness", 0.6, 5)),
        (("Color", 0.7, 7), ("TranslateX", 0.5, 8)), (("Equalize", 0.3, None), ("AutoContrast", 0.4, None)),
        (("TranslateY", 0.4, 3), ("Sharpness", 0.2, 6)), (("Brightness", 0.9, 6), ("Color", 0.2, 8)),
        (("Solarize", 0.5, 2), ("Invert", 0.0, None)), (("Equalize", 0.2, None), ("AutoContrast", 0.6, None)),
        (("Equalize", 0.2, None), ("Equalize", 0.6, None)), (("Color", 0.9, 9), ("Equalize", 0.6, None)),
        (("AutoContrast", 0.8, None), ("Solarize", 0.2, 8)), (("Brightness", 0.1, 3), ("Color", 0.7, 0)),
        (("Solarize", 0.4, 5), ("AutoContrast", 0.9, None)), (("TranslateY", 0.9, 9), ("TranslateY", 0.7, 9)),
        (("AutoContrast", 0.9, None), ("Solarize", 0.8, 3)), (("Equalize", 0.8, None), ("Invert", 0.1, None)),
        (("TranslateY", 0.7, 9), ("AutoContrast", 0.9, None)),
    ),
    "svhn": (
        (("ShearX", 0.9, 4), ("Invert", 0.2, None)), (("ShearY", 0.9, 8), ("Invert", 0.7, None)),
        (("Equalize", 0.6, None), ("Solarize", 0.6, 6)), (("Invert", 0.9, None), ("Equalize", 0.6, None)),
        (("Equalize", 0.6, None), ("Rotate", 0.9, 3)), (("ShearX", 0.9, 4), ("AutoContrast", 0.8, None)),
        (("ShearY", 0.9, 8), ("Invert", 0.4, None)), (("ShearY", 0.9, 5), ("Solarize", 0.2, 6)),
        (("Invert", 0.9, None), ("AutoContrast", 0.8, None)), (("Equalize", 0.6, None), ("Rotate", 0.9, 3)),
        (("ShearX", 0.9, 4), ("Solarize", 0.3, 3)), (("ShearY", 0.8, 8), ("Invert", 0.7, None)),
        (("Equalize", 0.9, None), ("TranslateY", 0.6, 6)), (("Invert", 0.9, None), ("Equalize", 0.6, None)),
        (("Contrast", 0.3, 3), ("Rotate", 0.8, 4)), (("Invert", 0.8, None), ("TranslateY", 0.0, 2)),
        (("ShearY", 0.7, 6), ("Solarize", 0.4, 8)), (("Invert", 0.6, None), ("Rotate", 0.8, 4)),
        (("ShearY", 0.3, 7), ("TranslateX", 0.9, 3)), (("ShearX", 0.1, 6), ("Invert", 0.6, None)),
        (("Solarize", 0.7, 2), ("TranslateY", 0.6, 7)), (("ShearY", 0.8, 4), ("Invert", 0.8, None)),
        (("ShearX", 0.7, 9), ("TranslateY", 0.8, 3)), (("ShearY", 0.8, 5), ("AutoContrast", 0.7, None)),
        (("ShearX", 0.7, 2), ("Invert", 0.1, None)),
    ),
}
"""AutoAugment's learned sub-policies per dataset."""


# ---------------------------------------------------------------- per sample, compiled

MAX_STEPS = 8
"""Operations a policy applies to one sample at most (``num_ops`` above it is refused)."""


@cached_njit
def linspace32(start, end, steps, i):
    """Value ``i`` of ``torch.linspace(start, end, steps)`` in float32, as
    torch's scalar CPU loop computes it (from the start for the first half,
    from the end for the second).  torch's vector loop may differ in the
    last bit, which moves no translation's whole pixels (tested at every
    size from 8 to 1024)."""
    s, e = np.float32(start), np.float32(end)
    if steps == 1:
        return np.float64(s)
    step = (e - s) / np.float32(steps - 1)
    if i < steps // 2:
        return np.float64(s + step * np.float32(i))
    return np.float64(e - step * np.float32(steps - i - 1))


@cached_njit
def magnitude_of(space, row, b, height, width):
    """Bin ``b``'s magnitude of operation ``row`` of a compiled space
    (:meth:`Space.compiled`), for an image of ``height`` x ``width``
    (translations scale with the size)."""
    _, _, starts, ends, scales, table = space
    end = ends[row]
    if end == _WIDTH:
        return linspace32(starts[row], scales[row] * width, table.shape[1], b)
    if end == _HEIGHT:
        return linspace32(starts[row], scales[row] * height, table.shape[1], b)
    return table[row, b]


_STEP_REFUSED = ("a policy step takes (height, width, channels) C-contiguous uint8 images of 1 to 65500 pixels a side, "
                 "dst apart from src, a fill of a value per channel, a known operation and a magnitude that is a "
                 "number (slipstream.native.last_error() says what was wrong)")


@cached_njit
def apply_primitive(op, magnitude, src, dst, fill, nearest, transform):
    """Apply primitive ``op`` at ``magnitude`` to ``src`` into ``dst`` (a
    different array) as torchvision's ``_apply_op`` does on a PIL image
    (C ``slip_policy_step``: the matrix torchvision builds, then Pillow's
    warp or tone kernel; a geometric step of magnitude 0 copies, as
    Pillow's pixels then are).  A geometric primitive appends the map it
    applied to ``transform`` (a :mod:`slipstream.fields.geometry` transform)."""
    inverse = np.empty(6)
    height, width, channels = src.shape
    moved = slip_policy_step(op, magnitude, src, image_bytes(src), height, width, channels, src.strides[0], dst,
                             image_bytes(dst), dst.strides[0], fill, fill.size, nearest, inverse, inverse.size)
    follow_step(moved, inverse, transform, height, width)


@cached_njit(inline="always")
def follow_step(moved, inverse, transform, height, width):
    """After a policy step's C kernel returned ``moved``: raise its refusal,
    or append to ``transform`` the map whose Pillow AFFINE data it wrote to
    ``inverse`` when it moved pixels."""
    if moved < 0:
        raise ValueError(_STEP_REFUSED)
    if moved:
        step = np.empty(geometry.SIZE)
        warps.set_inverse(step, inverse, height, width)
        geometry.compose((transform.copy(), step), transform)


@functools.cache
def steps_applier(apply_one: Any) -> Any:
    """A compiled ``apply_steps(x, out, scratch, transform, ops, values,
    count, fill, nearest) -> out`` that applies ``count`` steps
    ``apply_one(ops[s], values[s], src, dst, fill, nearest, transform)``
    (such as :func:`apply_primitive`) to ``x``, alternating between ``out``
    and ``scratch`` so that no step reads what it writes, and leaves the
    result in ``out``; ``transform`` ends as the map of the whole.

    ``apply_one`` is called by name, never passed as a value: compiled code
    holding a function as a value holds its address, which Numba cannot
    write to its cache, and every process would compile the stage again."""

    @uncached_njit
    def apply_steps(x, out, scratch, transform, ops, values, count, fill, nearest):
        geometry.set_shift(transform, x.shape[0], x.shape[1], 0, 0, False, False)
        src = x
        for s in range(count):
            dst = out if (count - s) % 2 == 1 else scratch  # the last step writes ``out``
            apply_one(ops[s], values[s], src, dst, fill, nearest, transform)
            src = dst
        if count == 0:
            copy_sample(out, x)
        return out

    return apply_steps


# ---------------------------------------------------------------- the draws


@cached_njit
def drawn_magnitude(space, row, b, sign_draw, height, width):
    """The magnitude of operation ``row`` at bin ``b`` (operations without
    magnitudes: 0), negated when the operation is signed and ``sign_draw``
    falls below 1/2."""
    ops, signed = space[0], space[1]
    magnitude = magnitude_of(space, row, b, height, width) if _has_magnitude(ops[row]) else 0.0
    return -magnitude if signed[row] and sign_draw < 0.5 else magnitude


@cached_njit
def trivial_augment_draw(key, params, height, width, chosen, magnitudes):
    """TrivialAugmentWide's draw for one sample (``params``: the compiled
    space): one operation uniformly, one of its bins uniformly, negated with
    probability 1/2 when signed.  Fills ``chosen[0]`` and ``magnitudes[0]``;
    returns the number of steps, 1."""
    space = params[0]
    ops, table = space[0], space[5]
    row = rnd.integers(key, _TRIVIAL_DRAWS.primitive, 0, ops.size)
    b = rnd.integers(key, _TRIVIAL_DRAWS.bin, 0, table.shape[1])
    sign = rnd.uniform(key, _TRIVIAL_DRAWS.sign)
    chosen[0], magnitudes[0] = ops[row], drawn_magnitude(space, row, b, sign, height, width)
    return 1


@cached_njit
def rand_augment_draw(key, params, height, width, chosen, magnitudes):
    """RandAugment's draw for one sample (``params``: the compiled space,
    the number of operations, the magnitude bin): each operation chosen
    uniformly (with repetition), at the fixed bin, negated with probability
    1/2 when signed.  Returns the number of operations."""
    space, num_ops, magnitude_bin = params
    ops = space[0]
    for s in range(num_ops):
        row = rnd.integers(key, _RAND_DRAWS.primitive + s, 0, ops.size)
        sign = rnd.uniform(key, _RAND_DRAWS.sign + s)
        chosen[s], magnitudes[s] = ops[row], drawn_magnitude(space, row, magnitude_bin, sign, height, width)
    return num_ops


@cached_njit
def auto_augment_draw(key, params, height, width, chosen, magnitudes):
    """AutoAugment's draw for one sample (``params``: the compiled space
    and, per sub-policy and step, the operation's row, probability and bin,
    -1 for none): one sub-policy uniformly; each of its steps applied with
    its probability, negated with probability 1/2 when signed.  Returns the
    number of steps applied."""
    space, rows, probs, bins = params
    ops = space[0]
    policy = rnd.integers(key, _AUTO_DRAWS.policy, 0, rows.shape[0])
    count = 0
    for s in range(rows.shape[1]):
        if rnd.uniform(key, _AUTO_DRAWS.apply + s) < probs[policy, s]:
            row = rows[policy, s]
            chosen[count] = ops[row]
            sign = rnd.uniform(key, _AUTO_DRAWS.sign + s)
            magnitudes[count] = drawn_magnitude(space, row, max(bins[policy, s], 0), sign, height, width)
            count += 1
    return count


@cached_njit
def _has_magnitude(op):
    return not (op == Primitive.IDENTITY or op == Primitive.AUTOCONTRAST or op == Primitive.EQUALIZE
                or op == Primitive.INVERT)


# ---------------------------------------------------------------- the operations


def fill_color(fill: Any) -> np.ndarray:
    """The RGB fill of the pixels a geometric step uncovers: None (black), a
    number, or three (torchvision's ``fill``)."""
    values = warps.fill_values(0 if fill is None else fill)
    if len(values) not in (1, 3):
        raise ArgumentError(f"fill must be None, a number or 3 numbers (R, G, B), got {fill!r}")
    return np.broadcast_to(np.array(values, np.uint8), (3,)).copy()


def _fill(value: Any) -> Any:
    """A fill :func:`fill_color` takes, kept as given (a bool is no colour)."""
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, (tuple, list))
                                                and any(isinstance(v, (bool, np.bool_)) for v in value)):
        raise Refused()
    try:
        fill_color(value)
    except (ArgumentError, TypeError):
        raise Refused() from None
    return value


FILL = Custom(_fill, "None (black), a number or 3 numbers (R, G, B), each in [0, 255]",
              bad=(-1, 256, math.nan, (1, 2), (0, 0, 300), "black", True), good=(1, 2, 3))
"""The colour of the pixels a geometric step uncovers."""

POLICY_INTERPOLATION = Choice(warps.INTERPOLATIONS, normalize=enum_name)
"""How a policy's geometric steps resample."""

_FILL_DOC = "the colour of uncovered pixels"
_INTERPOLATION_DOC = "for the geometric operations"
_BINS = Int(2, 1024)
_BINS_DOC = "magnitudes per operation"


@dataclasses.dataclass(frozen=True)
class Policy(Operation):
    """What the policies share: (height, width, 3) uint8 images in, the
    result and its transform out, steps drawn per sample by the class's
    compiled ``draw(key, params, height, width, chosen, magnitudes) ->
    count`` from the values :meth:`draw_values` gives.  Subclasses declare
    the fields ``interpolation`` (structural) and ``fill`` (after their
    own, in torchvision's order)."""

    geometry: ClassVar[Geometry] = Geometry.MAPPED

    steps: ClassVar[int] = 1
    """Most operations one sample receives."""

    apply_one = staticmethod(apply_primitive)
    """What applies one drawn step (:func:`apply_primitive`: torchvision's operations)."""

    draw = staticmethod(trivial_augment_draw)
    """The compiled draw of one sample's steps."""

    def declare(self, state: State) -> Any:
        if len(state.shape) != 3 or state.shape[2] != 3 or state.dtype != np.uint8:
            raise ValueError(f"{type(self).__name__} takes (height, width, 3) uint8 images, got {state.shape} "
                             f"{state.dtype}")
        return state, [Allocation(state.shape, state.dtype), Allocation(state.shape, state.dtype),
                       Allocation((geometry.SIZE,), np.float64, name=geometry.TRANSFORM)]

    def draw_values(self) -> tuple[Any, ...]:
        """What the class's ``draw`` takes as ``params``."""
        raise NotImplementedError

    def runtime_values(self) -> tuple[np.ndarray, tuple[Any, ...]]:
        """The fill's RGB, then what the draw takes."""
        return (fill_color(self.fill), self.draw_values())

    def generate_code(self):
        draw, steps, nearest = type(self).draw, self.steps, self.interpolation == "nearest"
        apply_steps = steps_applier(self.apply_one)

        def policy(x, out, scratch, transform, key, values):
            fill, params = values
            chosen, magnitudes = np.empty(steps, np.int64), np.empty(steps)
            count = draw(key, params, x.shape[0], x.shape[1], chosen, magnitudes)
            return apply_steps(x, out, scratch, transform, chosen, magnitudes, count, fill, nearest)

        return policy


@dataclasses.dataclass(frozen=True)
class TrivialAugmentWide(Policy):
    """torchvision's ``TrivialAugmentWide`` (Müller and Hutter, "TrivialAugment:
    Tuning-free Yet State-of-the-Art Data Augmentation", ICCV 2021): per
    sample, one of 14 operations chosen uniformly, at a magnitude drawn
    uniformly from ``num_magnitude_bins`` bins of its range (shears and
    enhancements to 0.99, translations to 32 pixels, rotations to 135
    degrees), negated half of the time where the operation is signed.

    Args:
        num_magnitude_bins: magnitudes per operation (2 to 1024).
        interpolation: ``"nearest"`` (torchvision's default) or ``"bilinear"``
            for the geometric operations.
        fill: the colour of uncovered pixels: None (black), a number, or 3.
    """

    num_magnitude_bins: int = param(_BINS, _BINS_DOC, default=31)
    interpolation: Any = param(POLICY_INTERPOLATION, _INTERPOLATION_DOC, default="nearest", structural=True)
    fill: Any = param(FILL, _FILL_DOC, default=None)

    def draw_values(self) -> tuple[Any, ...]:
        return (trivial_augment_space(self.num_magnitude_bins).compiled(),)


@dataclasses.dataclass(frozen=True)
class RandAugment(Policy):
    """torchvision's ``RandAugment`` (Cubuk et al., "RandAugment: Practical
    automated data augmentation with a reduced search space", NeurIPS 2020
    workshops): per sample, ``num_ops`` operations chosen uniformly from 14
    (with repetition), each at bin ``magnitude`` of ``num_magnitude_bins``,
    negated half of the time where the operation is signed.

    Args:
        num_ops: operations per sample (0 to 8).
        magnitude: the bin, in [0, num_magnitude_bins).
        num_magnitude_bins: magnitudes per operation (2 to 1024).
        interpolation, fill: as for :class:`TrivialAugmentWide`.
    """

    num_ops: int = param(Int(0, MAX_STEPS), "operations per sample, each chosen uniformly (with repetition)",
                         default=2)
    magnitude: int = param(Int(0, 1023), "the bin every operation takes, in `[0, num_magnitude_bins)`", default=9)
    num_magnitude_bins: int = param(_BINS, _BINS_DOC, default=31)
    interpolation: Any = param(POLICY_INTERPOLATION, _INTERPOLATION_DOC, default="nearest", structural=True)
    fill: Any = param(FILL, _FILL_DOC, default=None)

    steps: ClassVar[int] = MAX_STEPS
    draw = staticmethod(rand_augment_draw)

    def __post_init__(self) -> None:
        if self.magnitude >= self.num_magnitude_bins:
            raise ArgumentError(f"RandAugment: magnitude must be an int in [0, num_magnitude_bins="
                                f"{self.num_magnitude_bins}), got {self.magnitude!r}")

    def draw_values(self) -> tuple[Any, ...]:
        return (rand_augment_space(self.num_magnitude_bins).compiled(), self.num_ops, self.magnitude)


def _policy_name(value: Any) -> str | None:
    """An AutoAugment policy's name: a name, or torchvision's ``AutoAugmentPolicy`` member."""
    name = enum_name(value)
    return None if name is None else name.lower()


@dataclasses.dataclass(frozen=True)
class AutoAugment(Policy):
    """torchvision's ``AutoAugment`` (Cubuk et al., CVPR 2019): per sample,
    one of the 25 learned sub-policies of ``policy`` chosen uniformly, each
    of its two steps applied with its probability at its magnitude bin (of
    10), negated half of the time where the operation is signed.

    Args:
        policy: ``"imagenet"`` (default), ``"cifar10"`` or ``"svhn"``
            (torchvision's ``AutoAugmentPolicy`` members are accepted too).
        interpolation, fill: as for :class:`TrivialAugmentWide`.
    """

    policy: Any = param(Choice(tuple(AUTO_AUGMENT_POLICIES), normalize=_policy_name),
                        "the learned sub-policies (torchvision's `AutoAugmentPolicy` members are accepted)",
                        default="imagenet")
    interpolation: Any = param(POLICY_INTERPOLATION, _INTERPOLATION_DOC, default="nearest", structural=True)
    fill: Any = param(FILL, _FILL_DOC, default=None)

    steps: ClassVar[int] = 2
    draw = staticmethod(auto_augment_draw)

    def draw_values(self) -> tuple[Any, ...]:
        return auto_augment_params(self.policy)


def auto_augment_params(policy: str) -> tuple[Any, ...]:
    """What :func:`auto_augment_draw` takes for ``policy``: the compiled
    space and, per sub-policy and step, the operation's row in the space,
    its probability and its bin (-1: none)."""
    space = auto_augment_space()
    row_of = {op: row for row, op in enumerate(space.ops)}
    steps = AUTO_AUGMENT_POLICIES[policy]
    rows = np.array([[row_of[int(NAMES[name])] for name, _, _ in sub] for sub in steps], np.int64)
    probs = np.array([[p for _, p, _ in sub] for sub in steps])
    bins = np.array([[-1 if b is None else b for _, _, b in sub] for sub in steps], np.int64)
    return space.compiled(), rows, probs, bins
