"""timm's RandAugment, from its configuration strings (``"rand-m9-mstd0.5-inc1"``),
chosen per sample inside the compiled loop.

timm's RandAugment (``timm/data/auto_augment.py``: ``rand_augment_transform``,
``RandAugment``, ``AugmentOp`` and its ``_*_level_to_arg`` functions) is not
torchvision's: its operations and ranges differ (SolarizeAdd, the
"increasing" variants, shears and translations without a centre, enhancement
factors from 0.1 to 1.9), each chosen operation applies with probability
0.5, and its magnitude may be drawn per operation around ``m``.  Its pixels
are Pillow's (``ImageOps``, ``ImageEnhance``, ``Image.transform``,
``Image.rotate``), which the C kernel ``slip_timm_step`` computes; the draws
are slipstream's counter-based ones with timm's distributions.  Like the
other policies it is geometric, so boxes follow it.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, ClassVar

import numpy as np

from slipstream.compiler import random as rnd
from slipstream.compiler.jit import cached_njit
from slipstream.compiler.params import Custom, Refused, param
from slipstream.errors import ArgumentError
from slipstream.native import TimmOp, slip_timm_step
from slipstream.ops.policies import FILL, MAX_STEPS, POLICY_INTERPOLATION, Policy, follow_step
from slipstream.ops.warps import image_bytes


TRANSFORMS = ("AutoContrast", "Equalize", "Invert", "Rotate", "Posterize", "Solarize", "SolarizeAdd", "Color",
              "Contrast", "Brightness", "Sharpness", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel")
"""timm's ``_RAND_TRANSFORMS``."""

INCREASING_TRANSFORMS = ("AutoContrast", "Equalize", "Invert", "Rotate", "PosterizeIncreasing", "SolarizeIncreasing",
                         "SolarizeAdd", "ColorIncreasing", "ContrastIncreasing", "BrightnessIncreasing",
                         "SharpnessIncreasing", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel")
"""timm's ``_RAND_INCREASING_TRANSFORMS`` (``inc1``)."""

CHOICE_WEIGHTS = {"Rotate": 0.3, "ShearX": 0.2, "ShearY": 0.2, "TranslateXRel": 0.1, "TranslateYRel": 0.1,
                  "Color": 0.025, "Sharpness": 0.025, "AutoContrast": 0.025, "Solarize": 0.005, "SolarizeAdd": 0.005,
                  "Contrast": 0.005, "Brightness": 0.005, "Equalize": 0.005, "Posterize": 0.0, "Invert": 0.0}
"""timm's ``_RAND_CHOICE_WEIGHTS_0`` (``w0``: weighted choice, without replacement)."""

NAMES = {"AutoContrast": TimmOp.AUTO_CONTRAST, "Equalize": TimmOp.EQUALIZE, "Invert": TimmOp.INVERT,
         "Rotate": TimmOp.ROTATE, "Posterize": TimmOp.POSTERIZE, "PosterizeIncreasing": TimmOp.POSTERIZE_INCREASING,
         "Solarize": TimmOp.SOLARIZE, "SolarizeIncreasing": TimmOp.SOLARIZE_INCREASING,
         "SolarizeAdd": TimmOp.SOLARIZE_ADD, "Color": TimmOp.COLOR, "ColorIncreasing": TimmOp.COLOR_INCREASING,
         "Contrast": TimmOp.CONTRAST, "ContrastIncreasing": TimmOp.CONTRAST_INCREASING,
         "Brightness": TimmOp.BRIGHTNESS, "BrightnessIncreasing": TimmOp.BRIGHTNESS_INCREASING,
         "Sharpness": TimmOp.SHARPNESS, "SharpnessIncreasing": TimmOp.SHARPNESS_INCREASING,
         "ShearX": TimmOp.SHEAR_X, "ShearY": TimmOp.SHEAR_Y, "TranslateXRel": TimmOp.TRANSLATE_X_REL,
         "TranslateYRel": TimmOp.TRANSLATE_Y_REL}
"""timm's operation names and their codes."""

LEVEL_DENOM = 10.0
"""timm's ``_LEVEL_DENOM``: magnitude ``m`` is the fraction ``m / 10`` of each range."""

TRANSLATE_PCT = 0.45
"""timm's default ``translate_pct``: relative translations reach 45% of the size."""


@dataclasses.dataclass(frozen=True)
class RandAugmentConfig:
    """A parsed timm RandAugment string (see :func:`parse_rand_augment`)."""

    magnitude: float = LEVEL_DENOM
    num_layers: int = 2
    magnitude_std: float = 0.0
    magnitude_max: float = LEVEL_DENOM
    increasing: bool = False
    weighted: bool = False


def parse_rand_augment(config: str) -> RandAugmentConfig:
    """timm's ``rand_augment_transform`` configuration string: ``"rand"``
    then dash-separated sections, in any order: ``m<int>`` magnitude
    (default 10), ``n<int>`` operations per image (default 2),
    ``mstd<float>`` standard deviation of the magnitude's noise (above 100:
    uniform in [0, m]), ``mmax<int>`` the magnitude's upper bound (default
    10; 0 means 10, as in timm), ``inc<0|1>`` the increasing operations, ``w0`` timm's choice
    weights (without replacement).

    Raises:
        ArgumentError: the string is not one timm takes, naming the section.
    """
    if not isinstance(config, str):
        raise ArgumentError(f"a timm RandAugment configuration is a string such as 'rand-m9-mstd0.5-inc1', got "
                            f"{config!r}")
    sections = config.split("-")
    if sections[0] != "rand":
        raise ArgumentError(f"timm RandAugment configuration {config!r} must start with 'rand', as "
                            f"'rand-m9-mstd0.5-inc1' does")
    values: dict[str, Any] = {}
    for section in sections[1:]:
        key, value = (re.split(r"(\d.*)", section) + ["", ""])[:2]
        try:
            if key == "mstd":
                std = float(value)
                values["magnitude_std"] = math.inf if std > 100 else std
            elif key == "mmax":
                values["magnitude_max"] = float(int(value)) or LEVEL_DENOM  # timm's bound is mmax or 10
            elif key == "inc":
                values["increasing"] = bool(int(value))
            elif key == "m":
                values["magnitude"] = float(int(value))
            elif key == "n":
                values["num_layers"] = int(value)
            elif key == "w" and int(value) == 0:
                values["weighted"] = True
            else:
                raise ValueError
        except ValueError:
            raise ArgumentError(f"timm RandAugment configuration {config!r}: section {section!r} is not one of "
                                f"m<int>, n<int>, mstd<float>, mmax<int>, inc<0|1>, w0") from None
    parsed = RandAugmentConfig(**values)
    if not 0 <= parsed.num_layers <= 8:
        raise ArgumentError(f"timm RandAugment configuration {config!r}: n must be in [0, 8], got {parsed.num_layers}")
    if parsed.magnitude_std < 0:
        raise ArgumentError(f"timm RandAugment configuration {config!r}: mstd must not be negative")
    return parsed


# ---------------------------------------------------------------- per sample, compiled

_DRAWS = rnd.named_draws("choice", "apply", "level", "noise", "sign")  # layer l: choice + l, apply + l, ...


@cached_njit
def _negated(key, k, value):
    """``value`` negated with probability 1/2 (timm's ``_randomly_negate``)."""
    return -value if rnd.uniform(key, k) < 0.5 else value


@cached_njit
def argument_of(op, level, key, k):
    """timm's ``LEVEL_TO_ARG[op](level)``: the operation's argument for
    magnitude ``level`` (draw ``k`` of ``key`` decides a negation)."""
    fraction = level / LEVEL_DENOM
    if op == TimmOp.ROTATE:
        return _negated(key, k, fraction * 30.0)
    if op == TimmOp.POSTERIZE:
        return float(int(fraction * 4))
    if op == TimmOp.POSTERIZE_INCREASING:
        return float(4 - int(fraction * 4))
    # timm clips these two where a level above 10 (mmax > 10) would take them past its range
    if op == TimmOp.SOLARIZE:
        return float(min(256, int(fraction * 256)))
    if op == TimmOp.SOLARIZE_INCREASING:
        return float(256 - min(256, int(fraction * 256)))
    if op == TimmOp.SOLARIZE_ADD:
        return float(min(128, int(fraction * 110)))
    if op == TimmOp.COLOR or op == TimmOp.CONTRAST or op == TimmOp.BRIGHTNESS or op == TimmOp.SHARPNESS:
        return fraction * 1.8 + 0.1
    if op == TimmOp.COLOR_INCREASING or op == TimmOp.CONTRAST_INCREASING or op == TimmOp.BRIGHTNESS_INCREASING \
            or op == TimmOp.SHARPNESS_INCREASING:
        return max(0.1, 1.0 + _negated(key, k, fraction * 0.9))
    if op == TimmOp.SHEAR_X or op == TimmOp.SHEAR_Y:
        return _negated(key, k, fraction * 0.3)
    if op == TimmOp.TRANSLATE_X_REL or op == TimmOp.TRANSLATE_Y_REL:
        return _negated(key, k, fraction * TRANSLATE_PCT)
    return 0.0


@cached_njit
def apply_timm_op(op, argument, src, dst, fill, nearest, transform):
    """Apply timm's operation ``op`` with ``argument`` to ``src`` into
    ``dst`` (a different array), as timm's functions do with Pillow (C
    ``slip_timm_step``); a geometric one appends its map to ``transform``."""
    inverse = np.empty(6)
    height, width, channels = src.shape
    moved = slip_timm_step(op, argument, src, image_bytes(src), height, width, channels, src.strides[0], dst,
                           image_bytes(dst), dst.strides[0], fill, fill.size, nearest, inverse, inverse.size)
    follow_step(moved, inverse, transform, height, width)


@cached_njit
def timm_draw(key, params, height, width, chosen, arguments):
    """timm's RandAugment draws for one sample (``params``: the operations,
    their choice weights or an empty array, the layers, magnitude, its
    noise and bound): each layer's operation (uniformly with replacement, or
    by the weights without), applied with probability 1/2, at a magnitude
    drawn as ``AugmentOp`` draws it.  Fills ``chosen`` and ``arguments``
    with the steps applied; returns their number.  Layer l draws ``choice +
    l``, ``apply + l``, ``level + l`` (or the normal ``noise + l``) and
    ``sign + l`` of the key."""
    ops, weights, layers, magnitude, std, upper = params
    taken = np.zeros(ops.size, np.bool_)
    count = 0
    for layer in range(layers):
        row = _choose(key, _DRAWS.choice + layer, ops.size, weights, taken)
        if rnd.uniform(key, _DRAWS.apply + layer) >= 0.5:  # each chosen operation applies with probability 1/2
            continue
        level = magnitude
        if std == np.inf:
            level = rnd.uniform_range(key, _DRAWS.level + layer, 0.0, magnitude)
        elif std > 0.0:
            level = magnitude + std * rnd.normal(key, _DRAWS.noise + layer)
        level = max(0.0, min(level, upper))
        chosen[count], arguments[count] = ops[row], argument_of(ops[row], level, key, _DRAWS.sign + layer)
        count += 1
    return count


@cached_njit
def _choose(key, k, n, weights, taken):
    """A row: uniform over ``n`` with replacement when ``weights`` is empty,
    else by ``weights`` among the rows not ``taken`` yet (marked)."""
    if weights.size == 0:
        return rnd.integers(key, k, 0, n)
    total = 0.0
    for r in range(n):
        if not taken[r]:
            total += weights[r]
    u = rnd.uniform(key, k) * total
    last = -1
    for r in range(n):
        if taken[r] or weights[r] == 0.0:
            continue
        last = r
        u -= weights[r]
        if u < 0.0:
            break
    taken[last] = True
    return last


def _config(value: Any) -> str:
    """A timm RandAugment string that :func:`parse_rand_augment` reads."""
    if not isinstance(value, str):
        raise Refused()
    parse_rand_augment(value)
    return value


@dataclasses.dataclass(frozen=True)
class TimmRandAugment(Policy):
    """timm's RandAugment from its configuration string, e.g. DeiT's
    ``"rand-m9-mstd0.5-inc1"`` (see :func:`parse_rand_augment`): per sample
    and layer, an operation chosen from timm's 15 (uniformly, or by its
    weights with ``w0``), applied with probability 1/2 at magnitude ``m``
    (with ``mstd``, drawn from a normal around it, or uniformly below it),
    clipped to [0, ``mmax``].

    Args:
        config: the configuration string.
        interpolation: ``"bilinear"`` or ``"nearest"`` (timm's
            ``hparams["interpolation"]``; timm's default, a random choice of
            bilinear or bicubic per operation, is not offered).
        fill: the colour of uncovered pixels (timm's ``img_mean``): by
            default (124, 116, 104), the ImageNet mean that timm's
            ``create_transform`` passes.
    """

    config: str = param(Custom(_config, "a timm RandAugment string (`rand-m9-mstd0.5-inc1`)",
                               bad=("m9", "rand-x9", "rand-m-1", "rand-mstd-1", 9, None), good="rand-m9"),
                        "timm's string: `rand`, then `m<int>` magnitude (10), `n<int>` operations per image (2), "
                        "`mstd<float>` the magnitude's noise (above 100: uniform below `m`), `mmax<int>` its bound "
                        "(10; 0 means 10, as in timm), `inc1` the increasing operations, `w0` timm's choice weights",
                        default="rand-m9-mstd0.5-inc1")
    interpolation: Any = param(POLICY_INTERPOLATION, "`\"bilinear\"` or `\"nearest\"` (timm's "
                               "`hparams[\"interpolation\"]`)", default="bilinear", structural=True)
    fill: Any = param(FILL, "timm's `img_mean`, as its `create_transform` passes the ImageNet mean",
                      default=(124, 116, 104))

    steps: ClassVar[int] = MAX_STEPS
    apply_one = staticmethod(apply_timm_op)
    draw = staticmethod(timm_draw)

    def draw_values(self) -> tuple[Any, ...]:
        parsed = parse_rand_augment(self.config)
        names = INCREASING_TRANSFORMS if parsed.increasing else TRANSFORMS
        ops = np.array([int(NAMES[name]) for name in names], np.int64)
        # timm weighs TRANSFORMS' names: the increasing variants take their plain names' weights
        weights = np.array([CHOICE_WEIGHTS[n.replace("Increasing", "")] for n in names]) if parsed.weighted \
            else np.zeros(0)
        if weights.size:
            weights = weights / weights.sum()
        return (ops, weights, parsed.num_layers, float(parsed.magnitude), float(parsed.magnitude_std),
                float(parsed.magnitude_max))
