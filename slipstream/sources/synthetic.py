"""A labelled image folder generated on the spot, for demos, notebooks and
tests that must run on a machine with no dataset.

Each class is a shape (circle, square, triangle, ring, cross, stripes) drawn
in a random colour, size and place over a smooth random background with a
little noise, so that crops, flips and colour changes are visible and the
label can be checked by eye.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

CLASSES = ("circle", "square", "triangle", "ring", "cross", "stripes")


def _shape_mask(kind: str, yy: np.ndarray, xx: np.ndarray, cy: float, cx: float, r: float) -> np.ndarray:
    dy, dx = yy - cy, xx - cx
    if kind == "circle":
        return dy * dy + dx * dx <= r * r
    if kind == "square":
        return (np.abs(dy) <= r * 0.85) & (np.abs(dx) <= r * 0.85)
    if kind == "triangle":  # apex up: inside when below both slanted edges and above the base
        return (dy <= r * 0.8) & (dy >= -r + 2 * np.abs(dx))
    if kind == "ring":
        d2 = dy * dy + dx * dx
        return (d2 <= r * r) & (d2 >= (0.6 * r) ** 2)
    if kind == "cross":
        return ((np.abs(dy) <= r * 0.25) & (np.abs(dx) <= r)) | ((np.abs(dx) <= r * 0.25) & (np.abs(dy) <= r))
    if kind == "stripes":
        return (np.abs(dy) <= r) & (np.abs(dx) <= r) & (((dx + dy) // max(r / 3, 1)) % 2 == 0)
    raise ValueError(f"unknown shape {kind!r}; known: {', '.join(CLASSES)}")


def synthetic_image(kind: str, rng: np.random.Generator, height: int = 375, width: int = 500) -> np.ndarray:
    """One (height, width, 3) uint8 picture of ``kind`` (one of ``CLASSES``)."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    fy, fx, phase = rng.uniform(0.004, 0.02), rng.uniform(0.004, 0.02), rng.uniform(0, 2 * np.pi)
    base = rng.uniform(60, 200, 3).astype(np.float32)
    background = base + 35 * np.sin(xx * fx + phase)[..., None] + 35 * np.cos(yy * fy)[..., None]
    r = rng.uniform(0.18, 0.32) * min(height, width)
    cy, cx = rng.uniform(r, height - r), rng.uniform(r, width - r)
    colour = (255 - base + rng.uniform(-40, 40, 3)).clip(0, 255)  # far from the background's colour
    image = np.where(_shape_mask(kind, yy, xx, cy, cx, r)[..., None], colour, background)
    image += rng.normal(0, 6, image.shape)
    return image.clip(0, 255).astype(np.uint8)


def synthetic_folder(folder: str | Path, count: int = 240, height: int = 375, width: int = 500,
                     seed: int = 0, verbose: bool = True) -> Path:
    """Write ``count`` JPEGs (quality 90) as ``folder/<class>/<class>_<i>.jpg``,
    the classes of ``CLASSES`` in turn, ready for :class:`ImageFolder` and
    :func:`slipstream.write`.  The same ``seed`` gives the same files.
    Returns ``folder``."""
    from tqdm import tqdm

    from slipstream import native

    root = Path(folder)
    rng = np.random.default_rng(seed)
    for i in tqdm(range(count), desc="generating images", unit="img", disable=None if verbose else True):
        kind = CLASSES[i % len(CLASSES)]
        path = root / kind / f"{kind}_{i:05d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(native.jpeg_encode(synthetic_image(kind, rng, height, width), quality=90))
    return root


__all__ = ["CLASSES", "synthetic_folder", "synthetic_image"]
