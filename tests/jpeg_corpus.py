"""Test images: synthetic pictures encoded by Pillow in every JPEG flavour the
kernels must handle, and reference implementations in float64 NumPy.

Everything is generated, so the tests run on a fresh machine with nothing else.
"""

from __future__ import annotations

import dataclasses
import io

import numpy as np
from PIL import Image


def picture(height: int, width: int, seed: int = 0, noise: float = 12.0) -> np.ndarray:
    """An RGB uint8 image with smooth gradients, edges and noise: enough
    structure that a wrong pixel, row or channel shows."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float64)
    r = 255 * xx / max(width - 1, 1)
    g = 255 * yy / max(height - 1, 1)
    b = 128 + 100 * np.sin(xx / 7.0) * np.cos(yy / 5.0)
    img = np.stack([r, g, b], axis=-1) + rng.normal(0, noise, (height, width, 3))
    img[(xx // 16 + yy // 16) % 2 == 0] += 20  # a checkerboard of hard edges
    return np.clip(img, 0, 255).astype(np.uint8)


@dataclasses.dataclass(frozen=True)
class Sample:
    """One encoded test JPEG and how it was made."""

    name: str
    data: bytes
    height: int
    width: int
    mode: str  # Pillow mode it was saved from: RGB, L or CMYK
    subsampling: int | None  # Pillow's code: 0 = 4:4:4, 1 = 4:2:2, 2 = 4:2:0
    progressive: bool


def encode(img: Image.Image, **options) -> bytes:
    buf = io.BytesIO()
    img.save(buf, "JPEG", **options)
    return buf.getvalue()


def make_sample(height: int, width: int, mode: str = "RGB", subsampling: int | None = 2,
                progressive: bool = False, quality: int = 90, seed: int = 0, **options) -> Sample:
    img = Image.fromarray(picture(height, width, seed))
    if mode != "RGB":
        img = img.convert(mode)
    kwargs = dict(quality=quality, progressive=progressive, **options)
    if mode == "RGB" and subsampling is not None:
        kwargs["subsampling"] = subsampling
    extra = "".join(f"-{k}{v}" for k, v in options.items())
    name = f"{width}x{height}-{mode}-ss{subsampling}{'-prog' if progressive else ''}{extra}"
    return Sample(name, encode(img, **kwargs), height, width, mode, subsampling, progressive)


SIZES = [(1, 1), (1, 9), (9, 1), (7, 13), (16, 16), (37, 101), (251, 333), (375, 500)]
"""(height, width): tiny, odd, MCU-aligned and photo-sized."""


def corpus() -> list[Sample]:
    """The standard set: every size in 4:4:4, 4:2:2 and 4:2:0, grayscale, CMYK,
    progressive and with restart markers, plus one large 2000 x 3000 photo."""
    samples = []
    for i, (h, w) in enumerate(SIZES):
        for ss in (0, 1, 2):
            samples.append(make_sample(h, w, "RGB", ss, seed=i))
        samples.append(make_sample(h, w, "L", None, seed=i))
        samples.append(make_sample(h, w, "CMYK", None, seed=i))
        samples.append(make_sample(h, w, "RGB", 2, progressive=True, seed=i))
        samples.append(make_sample(h, w, "RGB", 1, restart_marker_rows=1, seed=i))
    samples.append(make_sample(2000, 3000, "RGB", 2, seed=99))
    return samples


def pillow_rgb(data: bytes) -> np.ndarray:
    """Pillow's full decode of a JPEG, as RGB."""
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


# ---------------------------------------------------------------- references


def filter_matrix(start: float, length: float, n: int, lo: int, hi: int, interp: str) -> np.ndarray:
    """Dense (n, hi) weight matrix of the resampling filter for the source
    interval [start, start + length) -> n outputs, taps limited to [lo, hi)."""
    scale = length / n
    support = max(scale, 1.0)
    i = np.arange(hi, dtype=np.float64)
    weights = np.zeros((n, hi))
    for j in range(n):
        if interp == "area":
            a = start + j * scale
            w = np.minimum(a + scale, i + 1) - np.maximum(a, i)
        elif interp == "bicubic":  # Keys' kernel, a = -0.5 (Pillow's), stretched by the shrink factor
            x = np.abs(i + 0.5 - (start + (j + 0.5) * scale)) / support
            w = np.where(x < 1, (1.5 * x - 2.5) * x * x + 1, np.where(x < 2, ((-0.5 * x + 2.5) * x - 4) * x + 2, 0))
        else:
            c = start + (j + 0.5) * scale
            w = 1.0 - np.abs(i + 0.5 - c) / support
        if interp != "bicubic":
            w = np.clip(w, 0, None)
        w[:lo] = 0
        row_sum = w.sum()
        weights[j] = w / row_sum
    return weights


def resize_reference(img: np.ndarray, y: float, x: float, h: float, w: float, out_h: int, out_w: int,
                     interp: str) -> np.ndarray:
    """Float64 separable resample of the (possibly fractional) rectangle
    (y, x, h, w) of img, taps limited to the whole pixels it touches,
    rounded to uint8."""
    img3 = img if img.ndim == 3 else img[:, :, None]
    y_lo, y_hi = int(np.floor(y)), min(int(np.ceil(y + h)), img3.shape[0])
    x_lo, x_hi = int(np.floor(x)), min(int(np.ceil(x + w)), img3.shape[1])
    wy = filter_matrix(y, h, out_h, y_lo, y_hi, interp)
    wx = filter_matrix(x, w, out_w, x_lo, x_hi, interp)
    src = img3[:y_hi, :x_hi].astype(np.float64)
    rows = np.tensordot(wy, src, axes=(1, 0))  # (out_h, width, channels)
    out = np.tensordot(rows, wx, axes=(1, 1)).transpose(0, 2, 1)  # (out_h, out_w, channels)
    return np.clip(np.floor(out + 0.5), 0, 255).astype(np.uint8)


# ---------------------------------------------------------------- hostile data


def truncations(data: bytes, count: int = 40) -> list[bytes]:
    """Prefixes of data cut inside its header and inside its entropy data."""
    sos = data.find(b"\xff\xda")
    cuts = set(range(0, min(sos + 12, len(data)), max(1, sos // 20)))
    cuts |= set(np.linspace(sos + 12, len(data) - 3, count // 2).astype(int).tolist())
    return [data[:c] for c in sorted(cuts)]


def with_dimensions(data: bytes, height: int, width: int) -> bytes:
    """data with its SOF header patched to claim height x width pixels."""
    for marker in (b"\xff\xc0", b"\xff\xc1", b"\xff\xc2"):
        at = data.find(marker)
        if at >= 0:
            patched = bytearray(data)
            patched[at + 5:at + 7] = height.to_bytes(2, "big")
            patched[at + 7:at + 9] = width.to_bytes(2, "big")
            return bytes(patched)
    raise ValueError("no SOF marker")


def png_bytes() -> bytes:
    buf = io.BytesIO()
    Image.fromarray(picture(8, 8)).save(buf, "PNG")
    return buf.getvalue()


def stored(data: bytes) -> bytes:
    """The bytes an image field stores for the JPEG ``data`` by default: the
    same coefficients re-coded into tiles (``RGBImageField``'s ``tile_width``)."""
    from slipstream import native
    from slipstream.fields.image import TILE_WIDTH

    return native.jpeg_add_restart_markers(data, TILE_WIDTH)
