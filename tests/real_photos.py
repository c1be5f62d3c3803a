"""Real photographs for the tests: those scikit-image ships in its wheel
(most of them public domain or CC0; they come with the package, not with
this repository), read from its data folder with Pillow (skimage itself is
not imported) and encoded again as JPEG by Pillow, or by libjpeg-turbo for
the one layout Pillow does not write, in the flavours a test asks for:
chroma subsampling, quality, size, Huffman tables, restart markers,
progressive scans.

Everything is made once per test session (the functions cache what they
return), so the tests need nothing beside the repository; the ImageNet
sample in ``../shared`` serves the benchmarks only.
"""

from __future__ import annotations

import functools
import importlib.util
import io
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

# Photographs in colour, the everyday ones first (the tests that want a few take the first).
COLOUR = {"astronaut": "astronaut.png", "coffee": "coffee.png", "chelsea": "chelsea.png", "rocket": "rocket.jpg",
          "motorcycle_left": "motorcycle_left.png", "immunohistochemistry": "ihc.png",
          "hubble_deep_field": "hubble_deep_field.jpg", "retina": "retina.jpg",
          "motorcycle_right": "motorcycle_right.png"}
# Photographs taken in grey, then textures.
GREY = {"camera": "camera.png", "coins": "coins.png", "moon": "moon.png", "brick": "brick.png",
        "grass": "grass.png", "gravel": "gravel.png"}
# The JPEGs among them, as their own encoders wrote them (not Pillow).
AS_SHIPPED = ("rocket", "hubble_deep_field", "retina")

# (width, height): the sizes of ImageNet's photos, most of them neither a
# multiple of 8 nor of 16, in landscape and portrait.
SIZES = [(500, 375), (333, 500), (500, 313), (376, 263), (500, 349), (375, 500), (500, 333), (433, 500)]
SUBSAMPLINGS = {"4:4:4": 0, "4:2:2": 1, "4:2:0": 2}


@functools.cache
def folder() -> Path:
    """scikit-image's data folder, found without importing scikit-image."""
    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the tests' photos come with scikit-image: pip install -e '.[test]' "
                                  "(or pip install scikit-image)")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def path(name: str) -> Path:
    return folder() / {**COLOUR, **GREY}[name]


@functools.cache
def _image(name: str) -> Image.Image:
    with Image.open(path(name)) as image:
        return image.convert("RGB" if name in COLOUR else "L")


def pixels(name: str, size: tuple[int, int] | None = None, mode: str | None = None) -> np.ndarray:
    """The photo as (h, w, 3) RGB or (h, w) grey uint8 values (a new array
    each call); with ``size`` (width, height), its central part of that
    shape resized to it; with ``mode`` (``"RGB"`` or ``"L"``), converted."""
    return np.array(image(name, size, mode))


@functools.cache
def image(name: str, size: tuple[int, int] | None = None, mode: str | None = None) -> Image.Image:
    """The photo as a Pillow image (shared: copy it before changing it)."""
    picture = _image(name)
    if size is not None and size != picture.size:
        picture = ImageOps.fit(picture, size, Image.Resampling.LANCZOS)
    return picture if mode is None or mode == picture.mode else picture.convert(mode)


def centre(name: str, height: int, width: int, size: tuple[int, int] | None = None) -> np.ndarray:
    """The central ``height`` x ``width`` pixels of the photo (at ``size``, as
    ``pixels`` makes it), C-contiguous."""
    array = pixels(name, size)
    top, left = (array.shape[0] - height) // 2, (array.shape[1] - width) // 2
    return np.ascontiguousarray(array[top:top + height, left:left + width])


@functools.cache
def jpeg(name: str, size: tuple[int, int] | None = None, subsampling: str = "4:2:0", quality: int = 90,
         **options) -> bytes:
    """The photo at ``size`` encoded by Pillow: in colour at ``subsampling``
    (``"4:4:4"``, ``"4:2:2"`` or ``"4:2:0"``), or ``"grey"`` (one component);
    ``options`` are Pillow's (``optimize``, ``progressive``,
    ``restart_marker_rows``, ...).  Pillow writes no 4:4:0 (chroma halved
    vertically only): ``"4:4:0"`` is libjpeg-turbo's own encode, through
    slipstream's binding, which takes ``optimize`` and ``progressive``."""
    if subsampling == "4:4:0":
        from slipstream import native

        flags = {"optimize": native.EncodeFlags.OPTIMIZE, "progressive": native.EncodeFlags.PROGRESSIVE}
        unknown = set(options) - set(flags)
        if unknown:
            raise TypeError(f"4:4:0 photos take optimize and progressive, not {sorted(unknown)}")
        chosen = sum((flags[name] for name, wanted in options.items() if wanted), native.EncodeFlags(0))
        return bytes(native.jpeg_encode(np.asarray(image(name, size, "RGB")), quality, native.Subsampling.S440,
                                         chosen))
    if subsampling == "grey":
        picture, kwargs = image(name, size, "L"), {}
    else:
        picture, kwargs = image(name, size, "RGB"), {"subsampling": SUBSAMPLINGS[subsampling]}
    buffer = io.BytesIO()
    picture.save(buffer, "JPEG", quality=quality, **kwargs, **options)
    return buffer.getvalue()


def views(count: int, names: list[str] | tuple[str, ...] = tuple(COLOUR)) -> list[tuple[str, tuple[int, int]]]:
    """``count`` different (photo, size) pairs: every photo once at one size,
    then every photo again at another, and so on."""
    pairs = [(name, SIZES[(round_ + k) % len(SIZES)]) for round_ in range(len(SIZES)) for k, name in enumerate(names)]
    if count > len(pairs):
        raise ValueError(f"{len(pairs)} views of {len(names)} photos at most, {count} asked for")
    return pairs[:count]


def jpegs(count: int, subsampling: str = "4:2:0", quality: int = 90, start: int = 0, **options) -> list[bytes]:
    """``count`` different photos or sizes of a photo (views ``start`` on),
    each a JPEG of that subsampling (``"grey"``: of the grey photos, then
    the colour ones in grey)."""
    names = tuple(GREY) + tuple(COLOUR) if subsampling == "grey" else tuple(COLOUR)
    return [jpeg(name, size, subsampling, quality, **options) for name, size in views(start + count, names)[start:]]


@functools.cache
def catalogue() -> tuple[tuple[str, bytes], ...]:
    """(name, JPEG) of the ordinary photos a loader meets, as varied as
    Pillow and libjpeg-turbo make them: 4:4:4, 4:2:2, 4:2:0, 4:4:0 and grey,
    qualities from 30 to 100, Huffman tables of T.81 or counted for the
    image, restart markers, progressive scans (the last few), and the JPEGs
    scikit-image ships as their encoders wrote them."""
    found = []
    qualities = (30, 75, 90, 95, 100)
    for k, (name, size) in enumerate(views(4 * len(COLOUR))):
        for s, subsampling in enumerate(("4:4:4", "4:2:2", "4:2:0", "4:4:0")):
            options = {"quality": qualities[(k + s) % len(qualities)], "optimize": bool((k + s) % 2)}
            if (k + s) % 3 == 2 and subsampling != "4:4:0":
                options["restart_marker_rows"] = 1 + k % 3
            found.append((described(name, size, subsampling, options), jpeg(name, size, subsampling, **options)))
    for k, (name, size) in enumerate(views(2 * len(GREY), tuple(GREY))):
        options = {"quality": qualities[k % len(qualities)], "optimize": bool(k % 2)}
        found.append((described(name, size, "grey", options), jpeg(name, size, "grey", **options)))
    found += [(f"{name} as shipped", path(name).read_bytes()) for name in AS_SHIPPED]
    for (name, size), subsampling in zip(views(4), ("4:4:4", "4:2:0", "4:2:2", "grey")):
        options = {"quality": 85, "progressive": True}
        found.append((described(name, size, subsampling, options), jpeg(name, size, subsampling, **options)))
    return tuple(found)


def described(name: str, size: tuple[int, int], subsampling: str, options: dict) -> str:
    return " ".join([name, f"{size[0]}x{size[1]}", subsampling, *(f"{k}={v}" for k, v in options.items())])
