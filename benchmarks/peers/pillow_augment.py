"""TrivialAugmentWide on a Pillow image, the way torchvision's PIL path
computes it, for the peers of the ``recipe`` scenario that have no policy
of their own (the DataLoader and SPDL).  Pillow only: imported from the
peers' own environments, which hold no torchvision.

The definitions are torchvision's (``torchvision.transforms.TrivialAugmentWide``
and its ``_apply_op``; Müller & Hutter, "TrivialAugment", arXiv:2103.10158):

* one of 14 operations drawn uniformly per image, then one of 31 magnitude
  bins drawn uniformly, negated with probability 1/2 for the signed ones;
* the wide space's bins: shears and the four enhancements over
  ``linspace(0, 0.99, 31)``, translations over ``linspace(0, 32, 31)``
  pixels (whole pixels: torchvision passes ``int(magnitude)``), rotation over
  ``linspace(0, 135, 31)`` degrees, posterize to ``8 - round(bin / 5)``
  bits, solarize at ``linspace(255, 0, 31)``;
* the geometric ones through ``Image.transform(AFFINE)`` with torchvision's
  inverse matrices (shears about the top-left corner, as ``_apply_op`` asks
  with ``center=[0, 0]``) and ``Image.rotate`` about the centre, with the
  recipe's bilinear resampling and black fill; the tones through
  ``ImageEnhance`` (factor ``1 + magnitude``) and ``ImageOps``.
"""

from __future__ import annotations

import random

from PIL import Image, ImageEnhance, ImageOps

BINS = 31
SIGNED = ("shear_x", "shear_y", "translate_x", "translate_y", "rotate", "brightness", "color", "contrast",
          "sharpness")
OPERATIONS = ("identity", "shear_x", "shear_y", "translate_x", "translate_y", "rotate", "brightness", "color",
              "contrast", "sharpness", "posterize", "solarize", "autocontrast", "equalize")
ENHANCERS = {"brightness": ImageEnhance.Brightness, "color": ImageEnhance.Color,
             "contrast": ImageEnhance.Contrast, "sharpness": ImageEnhance.Sharpness}


def magnitude(operation: str, bin_index: int) -> float:
    """The wide space's magnitude of ``operation`` at ``bin_index`` (0..30)."""
    step = bin_index / (BINS - 1)
    if operation in ("shear_x", "shear_y") or operation in ENHANCERS:
        return 0.99 * step
    if operation in ("translate_x", "translate_y"):
        return 32.0 * step
    if operation == "rotate":
        return 135.0 * step
    if operation == "posterize":
        return float(8 - round(bin_index / ((BINS - 1) / 6)))
    if operation == "solarize":
        return 255.0 * (1.0 - step)
    return 0.0


def apply(img: Image.Image, operation: str, value: float, resample: int = Image.BILINEAR,
          fill: tuple[int, int, int] = (0, 0, 0)) -> Image.Image:
    """``operation`` at magnitude ``value`` (signed) on an RGB image."""
    if operation == "identity":
        return img
    if operation in ("shear_x", "shear_y", "translate_x", "translate_y"):
        # torchvision's inverse affine matrices for these four reduce to one off-diagonal
        # term (the shear's tangent, i.e. its magnitude) or one negated whole-pixel offset.
        matrix = {"shear_x": (1.0, value, 0.0, 0.0, 1.0, 0.0),
                  "shear_y": (1.0, 0.0, 0.0, value, 1.0, 0.0),
                  "translate_x": (1.0, 0.0, -float(int(value)), 0.0, 1.0, 0.0),
                  "translate_y": (1.0, 0.0, 0.0, 0.0, 1.0, -float(int(value)))}[operation]
        return img.transform(img.size, Image.AFFINE, matrix, resample, fillcolor=fill)
    if operation == "rotate":
        return img.rotate(value, resample, fillcolor=fill)
    if operation in ENHANCERS:
        return ENHANCERS[operation](img).enhance(1.0 + value)
    if operation == "posterize":
        return ImageOps.posterize(img, int(value))
    if operation == "solarize":
        return ImageOps.solarize(img, value)
    if operation == "autocontrast":
        return ImageOps.autocontrast(img)
    if operation == "equalize":
        return ImageOps.equalize(img)
    raise ValueError(f"unknown operation {operation!r}")


def draw(rng: random.Random | None = None) -> tuple[str, float]:
    """One image's operation and signed magnitude, as TrivialAugmentWide draws
    them, from ``rng`` (default: the ``random`` module's generator)."""
    source = random if rng is None else rng
    operation = OPERATIONS[source.randrange(len(OPERATIONS))]
    value = magnitude(operation, source.randrange(BINS))
    if operation in SIGNED and source.randrange(2):
        value = -value
    return operation, value


def trivial_augment_wide(img: Image.Image, rng: random.Random | None = None) -> Image.Image:
    """TrivialAugmentWide(interpolation=BILINEAR) on ``img``: one drawn operation."""
    return apply(img, *draw(rng))
