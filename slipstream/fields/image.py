"""RGB images, stored as JPEG, as planar YCbCr 4:2:0 or as raw pixels."""

from __future__ import annotations

import dataclasses
import io
from typing import Any

import numpy as np

from slipstream import native
from slipstream.errors import ArgumentError, DecodeError, FieldValueError
from slipstream.fields.base import Encoded, Field, file_value, first_problem
from slipstream.fields.image_modes import JPEG_MODE, RAW_MODE, YUV420_MODE

WRITE_MODES = ("jpeg", "raw", "smart", "yuv420")
TILE_WIDTH = 32
"""The default widest tile, in pixels, of the JPEGs an image field stores."""
FFCV_WRITE_MODES = {"jpg": 'slipstream spells FFCV\'s "jpg" "jpeg"',
                    "proportion": 'FFCV\'s "proportion" (a random share of the images as JPEG) has no slipstream '
                                  'equivalent: "smart" stores images of at most smart_threshold pixels raw, larger '
                                  'ones as JPEG'}
"""FFCV's write modes that slipstream spells otherwise or lacks -> what to write instead."""
JPEG_SOI = b"\xff\xd8\xff"
SIZES = f"1 to {native.MAX_DIMENSION} pixels"
"""The sizes, a side, of the images a file holds: what the native decoders take."""
CHROMA_AVERAGED = ("stored as YCbCr 4:2:0 planes with their colour (chroma) averaged over 2 x 2 pixels, which loses "
                   "colour detail (up to 255 levels at sharp colour edges): write_mode='yuv420' keeps only a 4:2:0 "
                   "JPEG's own planes, and grey images, exactly; write_mode='jpeg' stores 4:4:4 and 4:2:2 JPEGs "
                   "without this loss")
"""The loss (:attr:`Encoded.loss`) of an image that ``write_mode="yuv420"`` stores from RGB pixels or from a JPEG
whose chroma is not 4:2:0."""


@dataclasses.dataclass(frozen=True)
class RGBImageField(Field, type_id=1):
    """An RGB image per sample, of any size.  The record holds its height and
    width, so a loader plans crops without parsing any image header.

    Args:
        write_mode: ``"jpeg"`` stores JPEG files: JPEG input with its DCT
            coefficients unchanged (re-coded into tiles, see ``tile_width``,
            or byte for byte after a check that it decodes), anything else
            compressed at ``jpeg_quality``.
            ``"yuv420"`` stores each image as its planar
            YCbCr 4:2:0 planes, 1.5 bytes a pixel: a 4:2:0 JPEG's own decoded
            planes (nothing lost but the chroma upsampling and colour
            conversion, which the loader does at the output size, skipping
            entropy decoding altogether); any other image (other chroma
            subsamplings, grey, PNG, arrays, resized images) converted from
            RGB with its chroma averaged over 2 x 2 pixels.  ``"raw"`` stores
            decoded pixels (fast to load, 3 bytes a pixel).  ``"smart"``
            stores images of at most ``smart_threshold`` pixels raw and
            larger ones as JPEG.
        max_resolution: when set, images whose longer side exceeds it are
            resized (area averaging) so that it equals ``max_resolution``,
            and then re-encoded.  Other fields are not: boxes, keypoints or
            masks stored beside the image must be in the stored image's
            pixels (``slipstream.write`` refuses it for a
            :class:`~slipstream.sources.COCODetection` or
            :class:`~slipstream.sources.SegmentationFolder`, whose
            annotations are in the original's).
        jpeg_quality: 1 to 100, for images this field compresses.
        smart_threshold: pixel count (height x width) up to which
            ``"smart"`` stores raw pixels.
        tile_width: every JPEG the field stores is re-coded losslessly
            into tiles at most this many pixels wide (restart markers, see
            :func:`slipstream.native.jpeg_add_restart_markers`): the pixels
            do not change, the size changes by about 2% either way at 32,
            and crops decode faster because the loader entropy-decodes only
            the tiles a crop touches; writing costs a lossless re-coding of
            each JPEG (BENCHMARKS.md, "Storage modes").  ``None`` stores
            JPEG input byte for byte.  A JPEG that re-coding would change
            the pixels of (a progressive one whose scans leave coefficients
            incomplete, which libjpeg-turbo decodes with block smoothing) or
            cannot re-code (coefficients wider than baseline JPEG codes) is
            stored byte for byte too.  Planes and raw pixels have no tiles.

    Accepted values: a path to an image file, the bytes of one (JPEG, PNG or
    anything Pillow reads), a ``PIL.Image``, a ``{"bytes": ..., "path": ...}``
    dict (Hugging Face's undecoded images), or a (H, W), (H, W, 1), (H, W, 3)
    or (H, W, 4) uint8 array.  Grayscale, palette, CMYK and RGBA inputs are
    read as RGB (alpha is dropped); a stored grayscale or CMYK JPEG is kept as
    it is and decodes to RGB.  16-bit grey images (Pillow's modes ``I;16``
    and ``I``, from 16-bit PNG and TIFF files) are scaled from 0 to 65535 to
    0 to 255; floating-point images (mode ``F``), whose range nothing says,
    are refused.  Every mode refuses an image larger than 65500 pixels a
    side (unless ``max_resolution`` resizes it), which no reader would read
    back.  With ``"yuv420"``, the writer warns once
    (:class:`~slipstream.errors.LossWarning`) how many images lost colour
    detail to the 4:2:0 planes.
    """

    write_mode: str = "jpeg"
    max_resolution: int | None = None
    jpeg_quality: int = 90
    smart_threshold: int = 128 * 128
    tile_width: int | None = TILE_WIDTH

    def __post_init__(self) -> None:
        if self.write_mode not in WRITE_MODES:
            hint = FFCV_WRITE_MODES.get(str(self.write_mode).lower())
            raise ArgumentError(f"write_mode must be one of {WRITE_MODES}, got {self.write_mode!r}"
                                f"{': ' + hint if hint else ''}")
        if self.max_resolution is not None and not (isinstance(self.max_resolution, int) and self.max_resolution > 0):
            raise ArgumentError(f"max_resolution must be a positive integer or None, got {self.max_resolution!r}")
        if not (isinstance(self.jpeg_quality, int) and 1 <= self.jpeg_quality <= 100):
            raise ArgumentError(f"jpeg_quality must be an integer from 1 to 100, got {self.jpeg_quality!r}")
        if not (isinstance(self.smart_threshold, int) and self.smart_threshold >= 0):
            raise ArgumentError(f"smart_threshold must be a non-negative integer, got {self.smart_threshold!r}")
        if self.tile_width is not None and not (isinstance(self.tile_width, int) and self.tile_width > 0):
            raise ArgumentError(f"tile_width must be a positive integer or None, got {self.tile_width!r}")

    def record_dtype(self) -> np.dtype:
        return np.dtype([("offset", "<u8"), ("size", "<u8"), ("height", "<u4"), ("width", "<u4"), ("mode", "u1"),
                         ("reserved", "V7")])

    # ---------------------------------------------------------------- writing

    def encode(self, value: Any) -> Encoded:
        jpeg, pixels = _load(value)
        if jpeg is not None:
            info = native.jpeg_info(jpeg)
            height, width = self.target_size(info.height, info.width)
            check_size(height, width)
            if self.write_mode == "yuv420" and (height, width) == (info.height, info.width):
                # The JPEG's own planes (a 4:2:0 one's are what it stores); decoding reads every block.
                return _encoded(height, width, YUV420_MODE, native.jpeg_decode_planes(jpeg).tobytes(),
                                None if _own_planes(info) else CHROMA_AVERAGED)
            raw = self._stores_raw(height, width)
            if (height, width) == (info.height, info.width) and not raw:
                # Corrupt data fails here: the check and the re-coding both
                # read every entropy-coded block.
                if self.tile_width is None:
                    native.jpeg_check(jpeg)
                return _encoded(height, width, JPEG_MODE, self._tiled(jpeg))
            scale = native.jpeg_scale_for(info.height, info.width, height, width)
            pixels = native.jpeg_decode(jpeg, scale_denom=scale)
        else:
            height, width = self.target_size(*pixels.shape[:2])
            check_size(height, width)
            raw = self._stores_raw(height, width)
        if pixels.shape[:2] != (height, width):
            pixels = native.resize(pixels, 0, 0, pixels.shape[0], pixels.shape[1], height, width, native.Interp.AREA)
        if self.write_mode == "yuv420":
            return _encoded(height, width, YUV420_MODE, native.rgb_to_planes(np.ascontiguousarray(pixels)).tobytes(),
                            None if _grey(pixels) else CHROMA_AVERAGED)
        if raw:
            return _encoded(height, width, RAW_MODE, np.ascontiguousarray(pixels).tobytes())
        return _encoded(height, width, JPEG_MODE, self._tiled(native.jpeg_encode(pixels, self.jpeg_quality)))

    def _tiled(self, jpeg: bytes) -> bytes:
        return tiled_jpeg(jpeg, self.tile_width)

    def target_size(self, height: int, width: int) -> tuple[int, int]:
        """The stored size of a ``height`` x ``width`` image."""
        longer = max(height, width)
        if self.max_resolution is None or longer <= self.max_resolution:
            return height, width
        scale = self.max_resolution / longer
        if height >= width:
            return self.max_resolution, max(1, round(width * scale))
        return max(1, round(height * scale)), self.max_resolution

    def _stores_raw(self, height: int, width: int) -> bool:
        return self.write_mode == "raw" or (self.write_mode == "smart" and height * width <= self.smart_threshold)

    # ---------------------------------------------------------------- reading

    def check_records(self, records: np.ndarray) -> tuple[int, str] | None:
        """Sizes from 1 to 65500 pixels a side, a known mode, raw images
        holding exactly height x width x 3 bytes and planes exactly the
        bytes of their size's planes."""
        height, width = records["height"].astype(np.int64), records["width"].astype(np.int64)
        mode, size = records["mode"], records["size"].astype(np.uint64)
        planes = (height * width + 2 * ((height + 1) // 2) * ((width + 1) // 2)).astype(np.uint64)
        problems = [
            (outside_sizes(height, width), f"has a size outside {SIZES}"),
            ((mode != JPEG_MODE) & (mode != RAW_MODE) & (mode != YUV420_MODE), "has an unknown storage mode"),
            ((mode == RAW_MODE) & (size != (height * width * 3).astype(np.uint64)), "is raw pixels of the wrong size"),
            ((mode == YUV420_MODE) & (size != planes), "is YCbCr 4:2:0 planes of the wrong size"),
        ]
        return first_problem(problems, lambda i: f"{height[i]}x{width[i]}, mode {mode[i]}, {size[i]} bytes")

    def read(self, record: np.void, data: memoryview | None) -> np.ndarray:
        """The (height, width, 3) uint8 RGB image.

        Raises:
            DecodeError: the JPEG cannot be decoded, or its header gives
                another size than the record (which loaders plan crops by).
        """
        height, width = int(record["height"]), int(record["width"])
        if record["mode"] == RAW_MODE:
            return np.frombuffer(data, np.uint8, height * width * 3).reshape(height, width, 3).copy()
        if record["mode"] == YUV420_MODE:
            return native.planes_crop_resize(data, height, width, 0, 0, height, width, height, width,
                                             interp=native.Interp.BILINEAR)
        check_stored_size(height, width, data)
        return native.jpeg_decode(data)


    def default_pipeline(self, name: str, source: Any) -> list[Any]:
        """Decodes whole images; only for fields whose images share one size."""
        from slipstream.fields.decoders import ImageDecoder

        return [ImageDecoder(source, name)]


def outside_sizes(height: Any, width: Any) -> Any:
    """Whether a ``height`` x ``width`` image is outside :data:`SIZES` (ints,
    or arrays of them, elementwise): the one rule by which the writer
    (:func:`check_size`) refuses an image and the reader
    (:meth:`RGBImageField.check_records`) refuses a file."""
    limit = native.MAX_DIMENSION
    return (height < 1) | (width < 1) | (height > limit) | (width > limit)


def check_size(height: int, width: int) -> None:
    """Refuse to store a ``height`` x ``width`` image that no reader would
    read back (:func:`outside_sizes`), whatever the write mode: raw pixels
    have no encoder of their own to refuse it.

    Raises:
        ArgumentError: the size is outside :data:`SIZES` a side.
    """
    if outside_sizes(height, width):
        hint = "; max_resolution= stores larger images resized" if max(height, width) > native.MAX_DIMENSION else ""
        raise ArgumentError(f"a {height}x{width} image is outside the sizes a dataset file holds ({SIZES} a side, "
                            f"which readers refuse the whole file beyond){hint}")


def check_stored_size(height: int, width: int, jpeg: Any) -> None:
    """Raise DecodeError when the header of a stored ``jpeg`` gives another
    size than its record's ``height`` x ``width``."""
    info = native.jpeg_info(jpeg)
    if (info.height, info.width) != (height, width):
        problem = (f"the stored size {height}x{width} disagrees with the JPEG header's {info.height}x{info.width} "
                   f"(the record or the JPEG was altered after writing)")
        raise DecodeError(problem, status=native.Status.EINVAL, detail=problem)


def tiled_jpeg(jpeg: bytes, tile_width: int | None) -> bytes:
    """``jpeg`` re-coded into tiles at most ``tile_width`` pixels wide, or as
    it is when ``tile_width`` is None.  A JPEG the re-coding refuses as
    unsupported but the decode accepts (a progressive one whose scans leave
    coefficients incomplete: its tiles would decode to other pixels; one
    with coefficients wider than baseline JPEG codes) is kept byte for byte; one the decode refuses too fails with the
    re-coding's error."""
    if tile_width is None:
        return jpeg
    try:
        return native.jpeg_add_restart_markers(jpeg, tile_width)
    except DecodeError as refused:
        if refused.status != native.Status.EUNSUPPORTED:
            raise
        try:
            native.jpeg_check(jpeg)
        except DecodeError:
            raise refused from None
    return jpeg


def _encoded(height: int, width: int, mode: int, data: Any, loss: str | None = None) -> Encoded:
    return Encoded({"height": height, "width": width, "mode": mode}, data, loss)


def _own_planes(info: native.JpegInfo) -> bool:
    """Whether ``jpeg_decode_planes`` gives a JPEG's planes without a loss:
    a YCbCr 4:2:0 JPEG's own planes, or a grey one's (whose chroma is flat)."""
    if info.subsampling == native.Subsampling.GRAY:
        return True
    return (info.components == 3 and info.colorspace == native.Colorspace.YCBCR
            and info.subsampling == native.Subsampling.S420)


def _grey(pixels: np.ndarray) -> bool:
    """Whether an RGB image is grey (R = G = B everywhere): its 4:2:0 planes,
    whose chroma is flat, lose nothing."""
    return bool(np.array_equal(pixels[..., 0], pixels[..., 1]) and np.array_equal(pixels[..., 1], pixels[..., 2]))


def _load(value: Any) -> tuple[bytes | None, np.ndarray | None]:
    """(JPEG bytes, None) or (None, (H, W, 3) uint8 pixels) for an accepted value."""
    value = file_value(value, "an image")
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        if data.startswith(JPEG_SOI):
            return data, None
        return None, _decode_with_pillow(data)
    if isinstance(value, np.ndarray):
        return None, _rgb_pixels(value)
    if type(value).__module__.startswith("PIL."):
        return None, _pillow_rgb(value)
    raise TypeError(f"not an image: {type(value).__name__} (give a path, encoded bytes, a PIL image or a uint8 array)")


def _decode_with_pillow(data: bytes) -> np.ndarray:
    try:
        from PIL import Image
    except ImportError:
        raise TypeError("the image is not a JPEG; reading other formats needs Pillow (pip install pillow)") from None
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            return _pillow_rgb(image)
    except FieldValueError:
        raise
    except Exception as exc:  # Pillow raises many types for bad data
        raise ValueError(f"not a readable image ({type(exc).__name__}: {exc})") from None


SIXTEEN_BIT_MODES = ("I;16", "I;16L", "I;16B", "I;16N", "I")
"""Pillow's modes of 16-bit grey images: ``I;16`` and its byte orders (a
16-bit grey PNG or TIFF), and ``I`` (32-bit integers: what Pillow made of
16-bit PNGs before it had ``I;16`` for them), read as values 0 to 65535."""


def _pillow_rgb(image: Any) -> np.ndarray:
    """The (H, W, 3) uint8 RGB pixels of a Pillow image.  Pillow's
    ``convert("RGB")`` clips the values of 16-bit grey images to 0 to 255,
    so that a 16-bit photo comes out nearly all white: their values are
    scaled from 0 to 65535 to 0 to 255 here instead.

    Raises:
        FieldValueError: an image whose values have no range to scale from:
            floating point (mode ``F``), or integers (mode ``I``) outside 0
            to 65535.
    """
    mode = image.mode
    if mode == "F" or mode in SIXTEEN_BIT_MODES:
        values = np.asarray(image)
        low, high = (values.min().item(), values.max().item()) if values.size else (0, 0)
        if mode == "F":
            raise FieldValueError(f"a floating-point image (Pillow mode 'F', values from {low:g} to {high:g}) has no "
                                  f"range that says which values are black and white (0 to 1? 0 to 255?): scale it to "
                                  f"8 bits as you mean it and give a uint8 array (or a Pillow image of mode 'L')")
        if low < 0 or high > 65535:
            raise FieldValueError(f"a 32-bit integer image (Pillow mode 'I') with values from {low} to {high}: only "
                                  f"values from 0 to 65535 (a 16-bit image) are scaled to 8 bits; scale it as you "
                                  f"mean it and give a uint8 array (or a Pillow image of mode 'L')")
        # 0 -> 0 and 65535 -> 255, rounded to the nearest level: value / 257.
        return _rgb_pixels(((values.astype(np.uint32) * 255 + 32767) // 65535).astype(np.uint8))
    return np.asarray(image.convert("RGB"))


def _rgb_pixels(array: np.ndarray) -> np.ndarray:
    if array.dtype != np.uint8:
        raise TypeError(f"image arrays must be uint8, got {array.dtype}")
    if array.ndim == 2:
        array = array[:, :, None]
    if array.ndim != 3 or array.shape[2] not in (1, 3, 4) or 0 in array.shape:
        raise ValueError(f"image arrays must be (H, W), (H, W, 1), (H, W, 3) or (H, W, 4), got shape {array.shape}")
    if array.shape[2] == 1:
        array = np.repeat(array, 3, axis=2)
    return np.ascontiguousarray(array[:, :, :3])
