"""The native kernels, callable from Python and from Numba.

This module mirrors ``native/include/slipstream.h`` one to one, in the manner
of pylibcudf:

* every C function ``slip_<name>`` has a Python function ``<name>`` with the
  same argument order, minus the arguments Python derives from the arrays
  themselves (buffer sizes, image sizes, strides).  It accepts NumPy arrays and
  anything exposing the buffer protocol or ``__array_interface__`` (bytes,
  memoryviews, CPU torch tensors) without copying, checks dtype, shape,
  layout and bounds, calls the C function with the GIL released, and raises a
  :class:`~slipstream.errors.SlipstreamError` subclass carrying the C message;
* every C enum is an :class:`enum.IntEnum` (``IntFlag`` for flags) with the C
  values: :class:`Status`, :class:`Colorspace`, :class:`Subsampling`,
  :class:`DecodeFlags`, :class:`EncodeFlags`, :class:`Interp`, :class:`Dtype`,
  :class:`Limit`, :class:`Primitive`, :class:`TimmOp`;
* every C function is also a Numba intrinsic under its C name
  (``slip_jpeg_decode`` ...), taking exactly the C arguments, for use inside
  ``@numba.njit(nogil=True, parallel=True)`` code.  Pointer arguments take
  NumPy arrays of the pointed-to type.  Intrinsics do no bounds checking
  beyond what the C function itself does.

Images are NumPy arrays of shape ``(height, width, channels)`` (or
``(height, width)`` for one channel) and dtype ``uint8``, with packed pixels;
rows may be padded (any positive row stride).
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, NamedTuple

import numpy as np

from slipstream._native import *  # noqa: F401,F403  (enums, constants, intrinsics)
from slipstream import _abi
from slipstream._native import (
    ABI_VERSION,
    FUNCTIONS,
    JPEG_INFO_DTYPE,
    Colorspace,
    DecodeFlags,
    Dtype,
    EncodeFlags,
    Interp,
    JpegInfoStruct,
    Limit,
    Primitive,
    Status,
    Subsampling,
    TimmOp,
    VIDEO_INFO_DTYPE,
    VideoCodec,
    VideoColour,
    lib,
)
from slipstream.errors import (
    ArgumentError,
    DecodeError,
    EncodeError,
    NativeIOError,
    NativeMemoryError,
    SlipstreamError,
)

# Every call goes through _calls: a Python int outside a parameter's C range
# is refused (ArgumentError) instead of wrapping around.
_calls = _abi.CheckedCalls(lib, FUNCTIONS.values())

_NUMPY_DTYPES = {Dtype.UINT8: np.dtype(np.uint8), Dtype.FLOAT16: np.dtype(np.float16), Dtype.FLOAT32: np.dtype(np.float32)}

_ERROR_CLASSES = {
    Status.EINVAL: ArgumentError,
    Status.EBUFFER: ArgumentError,
    Status.ENOMEM: NativeMemoryError,
    Status.EIO: NativeIOError,
    Status.EEOF: NativeIOError,
}


def _check(status: int, function: str, default: type[SlipstreamError] = DecodeError) -> None:
    """Raise the exception for a non-zero C status, with the C detail."""
    if status == Status.OK:
        return
    detail = _calls.slip_last_error().decode("utf-8", "replace")
    try:
        code: int = Status(status)
    except ValueError:
        code = status
    cls = _ERROR_CLASSES.get(code, default)
    name = code.name if isinstance(code, Status) else str(code)
    hint = "".join(f"; raise it with slipstream.native.set_limit(Limit.{limit.name}, n) or ${variable}"
                   for limit, variable in LIMIT_VARIABLES.items() if f"SLIP_LIMIT_{limit.name}" in detail)
    raise cls(f"{function}: {detail} ({name}){hint}", status=code, detail=detail)


# ---------------------------------------------------------------- array adapters


def _as_array(obj: Any, name: str) -> np.ndarray:
    """View obj as a NumPy array without copying."""
    if isinstance(obj, np.ndarray):
        return obj
    try:
        if hasattr(obj, "__array_interface__") or hasattr(obj, "__array__"):
            return np.asarray(obj)
        return np.asarray(memoryview(obj))
    except (TypeError, ValueError, RuntimeError) as exc:
        raise ArgumentError(f"{name} must be a NumPy array, a buffer or a CPU tensor, got {type(obj).__name__}: {exc}") from exc


def _bytes_arg(obj: Any, name: str) -> np.ndarray:
    """obj as a 1-D contiguous uint8 array (compressed data, raw buffers)."""
    arr = _as_array(obj, name)
    if not arr.flags.c_contiguous:
        raise ArgumentError(f"{name} must be contiguous")
    return arr.reshape(-1).view(np.uint8)


def _writable(arr: np.ndarray, name: str) -> np.ndarray:
    if not arr.flags.writeable:
        raise ArgumentError(f"{name} is read-only")
    return arr


def _image_arg(obj: Any, name: str, channels: tuple[int, ...]) -> np.ndarray:
    """obj as an (H, W, C) uint8 image with packed pixels (rows may be padded)."""
    arr = _as_array(obj, name)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3:
        raise ArgumentError(f"{name} must have shape (height, width[, channels]), got {arr.shape}")
    if arr.dtype != np.uint8:
        raise ArgumentError(f"{name} must have dtype uint8, got {arr.dtype}")
    h, w, c = arr.shape
    if c not in channels:
        raise ArgumentError(f"{name} has {c} channels; expected {' or '.join(map(str, channels))}")
    if h == 0 or w == 0:
        raise ArgumentError(f"{name} is empty: shape {arr.shape}")
    if (c > 1 and arr.strides[2] != 1) or arr.strides[1] != c or arr.strides[0] < w * c:
        raise ArgumentError(
            f"{name} must have packed pixels and non-negative row strides (strides {arr.strides}); "
            "use np.ascontiguousarray first"
        )
    return arr


def _output_image(out: Any, shape: tuple[int, int, int], name: str = "out") -> np.ndarray:
    """A caller's output image, checked against the shape the call produces."""
    if out is None:
        return np.empty(shape, np.uint8)
    arr = _writable(_image_arg(out, name, (shape[2],)), name)
    if arr.shape != shape:
        raise ArgumentError(f"{name} has shape {arr.shape}; this call writes {shape}")
    return arr


def _extent(arr: np.ndarray) -> int:
    """Bytes from arr's first element to the end of its last row."""
    return (arr.shape[0] - 1) * arr.strides[0] + arr.shape[1] * arr.strides[1]


# ---------------------------------------------------------------- library identity


def version() -> str:
    """Version of the native library, ``"MAJOR.MINOR.PATCH"`` (``slip_version``)."""
    return _calls.slip_version().decode()


def abi_version() -> int:
    """ABI version of the loaded native library (``slip_abi_version``)."""
    return int(_calls.slip_abi_version())


def strerror(status: int) -> str:
    """Name and meaning of a status code (``slip_strerror``)."""
    return _calls.slip_strerror(int(status)).decode()


def last_error() -> str:
    """Detail of this thread's most recent native failure (``slip_last_error``)."""
    return _calls.slip_last_error().decode("utf-8", "replace")


# ---------------------------------------------------------------- JPEG


class JpegInfo(NamedTuple):
    """What :func:`jpeg_info` reports about a JPEG (C ``slip_jpeg_info_t``)."""

    height: int
    width: int
    components: int
    colorspace: Colorspace
    subsampling: Subsampling
    progressive: bool
    mcu_height: int
    mcu_width: int


def jpeg_info(data: Any) -> JpegInfo:
    """Read a JPEG's header without decoding pixels (``slip_jpeg_info``).

    Args:
        data: the compressed bytes (bytes, bytearray, memoryview, uint8 array).

    Raises:
        DecodeError: not a JPEG, truncated or malformed header, unsupported JPEG.
    """
    return _jpeg_info(_bytes_arg(data, "data"), "jpeg_info")


def _jpeg_info(buf: np.ndarray, caller: str) -> JpegInfo:
    info = JpegInfoStruct()
    _check(_calls.slip_jpeg_info(buf.ctypes.data, buf.size, ctypes.addressof(info)), caller)
    return JpegInfo(
        height=info.height,
        width=info.width,
        components=info.components,
        colorspace=Colorspace(info.colorspace),
        subsampling=Subsampling(info.subsampling),
        progressive=bool(info.progressive),
        mcu_height=info.mcu_height,
        mcu_width=info.mcu_width,
    )


def jpeg_scale_for(crop_h: int, crop_w: int, out_h: int, out_w: int) -> int:
    """Largest DCT scale denominator (8, 4, 2 or 1) whose scaled crop still
    covers the output (``slip_jpeg_scale_for``)."""
    result = _calls.slip_jpeg_scale_for(crop_h, crop_w, out_h, out_w)
    if result < 0:
        _check(result, "jpeg_scale_for", ArgumentError)
    return int(result)


def scaled_region(y: int, x: int, h: int, w: int, scale_denom: int) -> tuple[int, int, int, int]:
    """The block of the 1/scale_denom-scaled image that :func:`jpeg_decode`
    returns for the source region (y, x, h, w): ``(y0, x0, height, width)``
    with y0 = floor(y/d) and height = ceil((y+h)/d) - y0, likewise for x."""
    d = scale_denom
    y0, x0 = y // d, x // d
    return y0, x0, -(-(y + h) // d) - y0, -(-(x + w) // d) - x0


def jpeg_decode(
    data: Any,
    y: int = 0,
    x: int = 0,
    h: int | None = None,
    w: int | None = None,
    scale_denom: int = 1,
    flags: DecodeFlags | int = DecodeFlags.DEFAULT,
    out: Any = None,
) -> np.ndarray:
    """Decode a region of a JPEG at a DCT scale into RGB (``slip_jpeg_decode``).

    Args:
        data: the compressed bytes.
        y, x: first source row and column of the region.
        h, w: region size in source pixels; ``None`` extends it to the image edge.
        scale_denom: DCT scale denominator, 1, 2, 4 or 8.
        flags: :class:`DecodeFlags` (``FLIP_X``, ``FAST_IDCT``).
        out: optional (height, width, 3) uint8 array to decode into, with the
            shape :func:`scaled_region` gives.  Without it, an output of more
            pixels than the ``Limit.PIXELS`` limit is refused before it is
            allocated.

    Returns:
        The (height, width, 3) uint8 RGB block (``out`` when given).

    Raises:
        DecodeError: bad, truncated, unsupported or oversized JPEG.
        ArgumentError: region outside the image, bad scale or flags, bad ``out``.
    """
    buf = _bytes_arg(data, "data")
    if h is None or w is None:
        info = _jpeg_info(buf, "jpeg_decode")
        h = info.height - y if h is None else h
        w = info.width - x if w is None else w
    if min(y, x) < 0 or min(h, w) <= 0:
        raise ArgumentError(f"jpeg_decode: region (y={y}, x={x}, h={h}, w={w}) is empty or negative")
    if scale_denom not in (1, 2, 4, 8):
        raise ArgumentError(f"jpeg_decode: scale_denom {scale_denom} is not 1, 2, 4 or 8")
    _, _, oh, ow = scaled_region(y, x, h, w, scale_denom)
    if out is None:
        _check_pixel_limit("jpeg_decode", oh, ow)
    arr = _output_image(out, (oh, ow, 3))
    status = _calls.slip_jpeg_decode(
        buf.ctypes.data, buf.size, y, x, h, w, scale_denom, int(flags), arr.ctypes.data, _extent(arr), arr.strides[0]
    )
    _check(status, "jpeg_decode")
    return arr


def _check_pixel_limit(function: str, height: int, width: int) -> None:
    """Raise the C library's ETOOBIG DecodeError for an output of more pixels
    than SLIP_LIMIT_PIXELS before its buffer is allocated: a small hostile
    file may claim 65500 x 65500 pixels, gigabytes that the call would then
    refuse anyway."""
    limit = get_limit(Limit.PIXELS)
    if height * width > limit:
        raise DecodeError(
            f"{function}: a {height} x {width} output has more pixels than the limit SLIP_LIMIT_PIXELS ({limit:,}); "
            f"raise it with slipstream.native.set_limit(Limit.PIXELS, n) or ${LIMIT_VARIABLES[Limit.PIXELS]}",
            status=Status.ETOOBIG,
        )


def jpeg_scan(data: Any) -> bool:
    """Whether a JPEG's entropy-coded data alone shows that it decodes
    (``slip_jpeg_scan``, the fast path of :func:`jpeg_check`): True only
    when ``jpeg_decode(data, scale_denom=8)`` would succeed; False when the
    scanner cannot tell (a progressive JPEG, or data it finds fault with).

    Raises:
        DecodeError: the header cannot be read, or the image is beyond ``Limit.PIXELS``.
    """
    buf = _bytes_arg(data, "data")
    result = _calls.slip_jpeg_scan(buf.ctypes.data, buf.size)
    if result < 0:
        _check(result, "jpeg_scan")
    return result == 1


def jpeg_check(data: Any) -> None:
    """Check that a JPEG decodes, reading every entropy-coded symbol without
    making pixels (``slip_jpeg_check``): it raises exactly when
    ``jpeg_decode(data, scale_denom=8)`` does, with the same status and
    message, and costs a fraction of it for ordinary sequential JPEGs.

    Args:
        data: the compressed bytes.

    Raises:
        DecodeError: bad, truncated, unsupported or oversized JPEG.
    """
    buf = _bytes_arg(data, "data")
    _check(_calls.slip_jpeg_check(buf.ctypes.data, buf.size), "jpeg_check")


def jpeg_decode_crop_resize(
    data: Any,
    y: int,
    x: int,
    h: int,
    w: int,
    out_h: int,
    out_w: int,
    flags: DecodeFlags | int = DecodeFlags.DEFAULT,
    interp: Interp | int = Interp.AREA,
    out: Any = None,
) -> np.ndarray:
    """Decode the crop (y, x, h, w) of a JPEG and resize it to out_h x out_w
    RGB pixels in one call, at the best DCT scale
    (``slip_jpeg_decode_crop_resize``).

    Args:
        data: the compressed bytes.
        y, x, h, w: the crop, in source pixels.
        out_h, out_w: output size.
        flags: :class:`DecodeFlags`; ``FLIP_X`` mirrors the output.
        interp: :class:`Interp` filter.
        out: optional (out_h, out_w, 3) uint8 array to write into.

    Returns:
        The (out_h, out_w, 3) uint8 image (``out`` when given).
    """
    buf = _bytes_arg(data, "data")
    arr = _output_image(out, (out_h, out_w, 3))
    status = _calls.slip_jpeg_decode_crop_resize(
        buf.ctypes.data, buf.size, y, x, h, w, out_h, out_w, int(flags), int(interp), arr.ctypes.data, _extent(arr),
        arr.strides[0],
    )
    _check(status, "jpeg_decode_crop_resize")
    return arr


# ---------------------------------------------------------------- pixels


def planes_bytes(height: int, width: int) -> int:
    """Bytes of a height x width image stored as planar YCbCr 4:2:0: Y, then
    Cb and Cr at half the height and width, rounded up
    (``slip_planes_bytes``).

    Raises:
        ArgumentError: a size outside 1 .. ``MAX_DIMENSION``.
    """
    result = int(_calls.slip_planes_bytes(height, width))
    _check(result if result < 0 else 0, "planes_bytes", ArgumentError)
    return result


def _planes_out(out: Any, size: int) -> np.ndarray:
    if out is None:
        return np.empty(size, np.uint8)
    arr = _writable(_bytes_arg(out, "out"), "out")
    if arr.size < size:
        raise ArgumentError(f"out holds {arr.size} bytes; the planes need {size}")
    return arr


def jpeg_decode_planes(data: Any, out: Any = None) -> np.ndarray:
    """Decode a JPEG into planar YCbCr 4:2:0 (``slip_jpeg_decode_planes``):
    a 4:2:0 JPEG's own decoded planes, any other JPEG decoded to RGB and
    converted (its chroma averaged over 2 x 2 pixels).

    Args:
        data: the compressed bytes.
        out: optional writable buffer of at least :func:`planes_bytes` bytes.

    Returns:
        The planes, a 1-D uint8 array of :func:`planes_bytes` bytes (a view
        of ``out`` when given).

    Raises:
        DecodeError: bad, truncated, unsupported or oversized JPEG.
    """
    buf = _bytes_arg(data, "data")
    info = _jpeg_info(buf, "jpeg_decode_planes")
    size = planes_bytes(info.height, info.width)
    if out is None:
        _check_pixel_limit("jpeg_decode_planes", info.height, info.width)
    arr = _planes_out(out, size)
    _check(_calls.slip_jpeg_decode_planes(buf.ctypes.data, buf.size, arr.ctypes.data, arr.size), "jpeg_decode_planes")
    return arr[:size]


def rgb_to_planes(src: Any, out: Any = None) -> np.ndarray:
    """An (H, W, 3) uint8 RGB image as planar YCbCr 4:2:0
    (``slip_rgb_to_planes``): JFIF's conversion, each chroma sample the
    mean of the pixels it covers.

    Returns:
        The planes, a 1-D uint8 array of :func:`planes_bytes` bytes (a view
        of ``out`` when given).
    """
    img = _image_arg(src, "src", (3,))
    h, w, _ = img.shape
    size = planes_bytes(h, w)
    arr = _planes_out(out, size)
    _check(_calls.slip_rgb_to_planes(img.ctypes.data, h, w, img.strides[0], arr.ctypes.data, arr.size), "rgb_to_planes",
           ArgumentError)
    return arr[:size]


def planes_crop_resize(
    planes: Any,
    height: int,
    width: int,
    y: int,
    x: int,
    h: int,
    w: int,
    out_h: int,
    out_w: int,
    flags: DecodeFlags | int = DecodeFlags.DEFAULT,
    interp: Interp | int = Interp.AREA,
    out: Any = None,
) -> np.ndarray:
    """Crop (y, x, h, w) out of the planes of a height x width image, resize
    it to out_h x out_w and convert it to RGB (``slip_planes_crop_resize``).

    Args:
        planes: the planes (:func:`planes_bytes` bytes or more).
        height, width: the image's size.
        y, x, h, w: the crop, in pixels.
        out_h, out_w: output size.
        flags: :class:`DecodeFlags`; ``FLIP_X`` mirrors the output.
        interp: :class:`Interp` filter.
        out: optional (out_h, out_w, 3) uint8 array to write into.

    Returns:
        The (out_h, out_w, 3) uint8 image (``out`` when given).

    Raises:
        DecodeError: fewer bytes than the planes of a height x width image.
        ArgumentError: a crop outside the image, a bad size, filter or ``out``.
    """
    buf = _bytes_arg(planes, "planes")
    arr = _output_image(out, (out_h, out_w, 3))
    status = _calls.slip_planes_crop_resize(buf.ctypes.data, buf.size, height, width, y, x, h, w, out_h, out_w,
                                         int(flags), int(interp), arr.ctypes.data, _extent(arr), arr.strides[0])
    _check(status, "planes_crop_resize")
    return arr


def resize(
    src: Any,
    y: int,
    x: int,
    h: int,
    w: int,
    dst_h: int,
    dst_w: int,
    interp: Interp | int = Interp.AREA,
    flip_x: bool = False,
    out: Any = None,
) -> np.ndarray:
    """Crop (y, x, h, w) out of an 8-bit image and resize it to dst_h x dst_w
    (``slip_resize``).  Pixels outside the crop never contribute.

    Args:
        src: (H, W[, C]) uint8 image with 1, 3 or 4 channels.
        y, x, h, w: the crop.
        dst_h, dst_w: output size.
        interp: :class:`Interp` filter.
        flip_x: mirror the output horizontally.
        out: optional output array of shape (dst_h, dst_w, C).

    Returns:
        The (dst_h, dst_w, C) image (``out`` when given); 2-D input gives a
        (dst_h, dst_w, 1) result.
    """
    img = _image_arg(src, "src", (1, 3, 4))
    src_h, src_w, c = img.shape
    arr = _output_image(out, (dst_h, dst_w, c))
    status = _calls.slip_resize(
        img.ctypes.data, src_h, src_w, c, img.strides[0], y, x, h, w, arr.ctypes.data, dst_h, dst_w, arr.strides[0],
        int(interp), int(bool(flip_x)),
    )
    _check(status, "resize", ArgumentError)
    return arr


def resize_region(
    src: Any,
    cy: float,
    cx: float,
    ch: float,
    cw: float,
    dst_h: int,
    dst_w: int,
    interp: Interp | int = Interp.AREA,
    flip_x: bool = False,
    out: Any = None,
) -> np.ndarray:
    """Resize the rectangle [cy, cy + ch) x [cx, cx + cw) of an 8-bit image,
    whose edges may fall between pixels, to dst_h x dst_w
    (``slip_resize_region``); otherwise as :func:`resize`."""
    img = _image_arg(src, "src", (1, 3, 4))
    src_h, src_w, c = img.shape
    arr = _output_image(out, (dst_h, dst_w, c))
    status = _calls.slip_resize_region(
        img.ctypes.data, src_h, src_w, c, img.strides[0], float(cy), float(cx), float(ch), float(cw), arr.ctypes.data,
        dst_h, dst_w, arr.strides[0], int(interp), int(bool(flip_x)),
    )
    _check(status, "resize_region", ArgumentError)
    return arr


def _channel_values(values: Any, channels: int, name: str) -> np.ndarray | None:
    """One float64 per channel from a scalar or a sequence, or None."""
    if values is None:
        return None
    try:
        return np.ascontiguousarray(np.broadcast_to(np.asarray(values, dtype=np.float64), (channels,)))
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"pack: {name} must be one number or {channels} numbers, got {values!r}") from exc


def pack(
    src: Any,
    dtype: Dtype | int | np.dtype | type | None = None,
    mean: Any = None,
    std: Any = None,
    *,
    layout: str = "CHW",
    out: Any = None,
) -> np.ndarray:
    """Convert an 8-bit (H, W, C) image to a tensor layout and element type,
    computing (pixel - mean[c]) / std[c] in the same pass (``slip_pack``).

    Args:
        src: (H, W[, C]) uint8 image, 1 to 4 channels.
        dtype: output element type: :class:`Dtype` or the NumPy types uint8,
            float16, float32.  Defaults to ``out``'s dtype, else float32.
        mean, std: per-channel values (or one value for all) in pixel units
            0..255, e.g. ``(123.675, 116.28, 103.53)``; ``None`` means 0 and 1.
            Not allowed with uint8 output.
        layout: ``"CHW"`` or ``"HWC"``: the shape of the output.
        out: optional output array (any strides, e.g. one sample of a batch).

    Returns:
        The (C, H, W) or (H, W, C) array (``out`` when given).
    """
    img = _image_arg(src, "src", (1, 2, 3, 4))
    h, w, c = img.shape
    if layout not in ("CHW", "HWC"):
        raise ArgumentError(f"pack: layout must be 'CHW' or 'HWC', got {layout!r}")
    shape = (c, h, w) if layout == "CHW" else (h, w, c)
    if dtype is None:
        np_dtype = _as_array(out, "out").dtype if out is not None else np.dtype(np.float32)
    elif isinstance(dtype, Dtype):
        np_dtype = _NUMPY_DTYPES[dtype]
    else:
        np_dtype = np.dtype(dtype)
    code = next((k for k, v in _NUMPY_DTYPES.items() if v == np_dtype), None)
    if code is None:
        raise ArgumentError(f"pack: dtype must be uint8, float16 or float32, got {np_dtype}")
    if out is None:
        arr = np.empty(shape, np_dtype)
    else:
        arr = _writable(_as_array(out, "out"), "out")
        if arr.shape != shape or arr.dtype != np_dtype:
            raise ArgumentError(f"pack: out is {arr.dtype}{list(arr.shape)}; this call writes {np_dtype}{list(shape)}")
    strides = arr.strides
    sc, sy, sx = strides if layout == "CHW" else (strides[2], strides[0], strides[1])
    mean_arr = _channel_values(mean, c, "mean")
    std_arr = _channel_values(std, c, "std")
    status = _calls.slip_pack(
        img.ctypes.data, h, w, c, img.strides[0], arr.ctypes.data, int(code), sc, sy, sx,
        None if mean_arr is None else mean_arr.ctypes.data, None if std_arr is None else std_arr.ctypes.data,
    )
    _check(status, "pack", ArgumentError)
    return arr


# ---------------------------------------------------------------- tones and warps


def _tone(function: str, src: Any, out: Any, *args: Any) -> np.ndarray:
    """Call the tone kernel ``slip_<function>`` on ``src`` into ``out`` (a new
    array when None; ``src`` itself works in place)."""
    img = _image_arg(src, "src", (1, 2, 3, 4))
    h, w, c = img.shape
    arr = _output_image(out, img.shape)
    status = getattr(_calls, f"slip_{function}")(img.ctypes.data, _extent(img), h, w, c, img.strides[0],
                                                  arr.ctypes.data, _extent(arr), arr.strides[0], *args)
    _check(status, function, ArgumentError)
    return arr


def posterize(src: Any, bits: int, out: Any = None) -> np.ndarray:
    """``ImageOps.posterize``: keep the top ``bits`` (0 to 8) bits of every
    value (``slip_posterize``).

    Args:
        src: (H, W[, C]) uint8 image, 1 to 4 channels.
        bits: bits kept; fewer than 0 count as 0, more than 8 as 8.
        out: optional output of src's shape, which may be ``src`` itself.

    Returns:
        The result (``out`` when given); 2-D input gives (H, W, 1).
    """
    return _tone("posterize", src, out, int(bits))


def solarize(src: Any, threshold: float, out: Any = None) -> np.ndarray:
    """``ImageOps.solarize``: every value ``v >= threshold`` becomes
    ``255 - v`` (``slip_solarize``); otherwise as :func:`posterize`."""
    return _tone("solarize", src, out, float(threshold))


def invert(src: Any, out: Any = None) -> np.ndarray:
    """``ImageOps.invert``: ``255 - v`` (``slip_invert``); otherwise as :func:`posterize`."""
    return _tone("invert", src, out)


def autocontrast(src: Any, out: Any = None) -> np.ndarray:
    """``ImageOps.autocontrast``: each channel stretched so that its lowest
    value becomes 0 and its highest 255 (``slip_autocontrast``); otherwise
    as :func:`posterize`."""
    return _tone("autocontrast", src, out)


def equalize(src: Any, out: Any = None) -> np.ndarray:
    """``ImageOps.equalize``: the histogram of each channel equalized
    (``slip_equalize``); otherwise as :func:`posterize`."""
    return _tone("equalize", src, out)


def brightness(src: Any, factor: float, out: Any = None) -> np.ndarray:
    """``ImageEnhance.Brightness(image).enhance(factor)`` (``slip_brightness``);
    otherwise as :func:`posterize`."""
    return _tone("brightness", src, out, float(factor))


def color(src: Any, factor: float, out: Any = None) -> np.ndarray:
    """``ImageEnhance.Color(image).enhance(factor)`` of an RGB image (a
    one-channel image is copied) (``slip_color``); otherwise as
    :func:`posterize`."""
    return _tone("color", src, out, float(factor))


def contrast(src: Any, factor: float, out: Any = None) -> np.ndarray:
    """``ImageEnhance.Contrast(image).enhance(factor)`` of an RGB or
    one-channel image (``slip_contrast``); otherwise as :func:`posterize`."""
    return _tone("contrast", src, out, float(factor))


def sharpness(src: Any, factor: float, out: Any = None) -> np.ndarray:
    """``ImageEnhance.Sharpness(image).enhance(factor)`` (``slip_sharpness``);
    otherwise as :func:`posterize`, but ``out`` must not overlap ``src``."""
    return _tone("sharpness", src, out, float(factor))


def _moving(src: Any, fill: Any, size: tuple[int, int] | None, out: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The source image, the output (``size``, or src's) and the fill colour,
    one value per channel, of a kernel that moves pixels."""
    img = _image_arg(src, "src", (1, 2, 3, 4))
    h, w, c = img.shape
    colour = np.ascontiguousarray(np.broadcast_to(np.asarray(fill, np.uint8), (c,)))
    out_h, out_w = (h, w) if size is None else size
    return img, _output_image(out, (out_h, out_w, c)), colour


def _warp(function: str, src: Any, data: Any, count: int, nearest: bool, fill: Any, size: tuple[int, int] | None,
          out: Any) -> np.ndarray:
    """Call the warp ``slip_warp_<function>`` with ``count`` coefficients."""
    coefficients = np.ascontiguousarray(data, np.float64).reshape(-1)
    if coefficients.size != count:
        raise ArgumentError(f"warp_{function}: {count} coefficients are needed, got {coefficients.size}")
    img, arr, colour = _moving(src, fill, size, out)
    (h, w, c), (out_h, out_w) = img.shape, arr.shape[:2]
    status = getattr(_calls, f"slip_warp_{function}")(
        img.ctypes.data, _extent(img), h, w, c, img.strides[0], arr.ctypes.data, _extent(arr), out_h, out_w,
        arr.strides[0], coefficients.ctypes.data, int(bool(nearest)), colour.ctypes.data, colour.size)
    _check(status, f"warp_{function}", ArgumentError)
    return arr


def warp_affine(src: Any, matrix: Any, nearest: bool = False, fill: Any = 0, size: tuple[int, int] | None = None,
                out: Any = None) -> np.ndarray:
    """Pillow's ``Image.transform(size, AFFINE, matrix, NEAREST or BILINEAR,
    fillcolor=fill)`` (``slip_warp_affine``).

    Args:
        src: (H, W[, C]) uint8 image, 1 to 4 channels.
        matrix: 6 numbers, Pillow's AFFINE data: output point (x, y) comes
            from source point (m0 x + m1 y + m2, m3 x + m4 y + m5).
        nearest: nearest neighbour, else bilinear.
        fill: the colour where no source pixel lands: one value, or one per channel.
        size: (height, width) of the output; None: src's.
        out: optional output array of shape (height, width, C), apart from src.

    Returns:
        The warped image (``out`` when given); 2-D input gives (height, width, 1).
    """
    return _warp("affine", src, matrix, 6, nearest, fill, size, out)


def warp_perspective(src: Any, coefficients: Any, nearest: bool = False, fill: Any = 0,
                     size: tuple[int, int] | None = None, out: Any = None) -> np.ndarray:
    """Pillow's ``Image.transform(size, PERSPECTIVE, coefficients, NEAREST
    or BILINEAR, fillcolor=fill)`` (``slip_warp_perspective``): output point
    (x, y) comes from ((a0 x + a1 y + a2) / d, (a3 x + a4 y + a5) / d),
    d = a6 x + a7 y + 1, of the source; ``coefficients`` are 8 numbers,
    the rest as :func:`warp_affine`."""
    return _warp("perspective", src, coefficients, 8, nearest, fill, size, out)


# ---------------------------------------------------------------- policy steps and mixing


def _step(function: str, op: int, value: float, src: Any, fill: Any, nearest: bool,
          out: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """Call the policy step ``slip_<function>``: the result, and the AFFINE
    data of the map it applied (None when it moved no pixel)."""
    img, arr, colour = _moving(src, fill, None, out)
    h, w, c = img.shape
    inverse = np.empty(6)
    moved = getattr(_calls, f"slip_{function}")(
        int(op), float(value), img.ctypes.data, _extent(img), h, w, c, img.strides[0], arr.ctypes.data, _extent(arr),
        arr.strides[0], colour.ctypes.data, colour.size, int(bool(nearest)), inverse.ctypes.data, inverse.size)
    _check(min(moved, Status.OK), function, ArgumentError)
    return arr, (inverse if moved else None)


def policy_step(op: Primitive | int, magnitude: float, src: Any, fill: Any = 0, nearest: bool = False,
                out: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
    """One step of torchvision's augmentation policies: the pixels of its
    ``_apply_op`` on a PIL image (``slip_policy_step``).

    Args:
        op: the :class:`Primitive`.
        magnitude: its magnitude, in torchvision's units (not NaN).
        src: (H, W[, C]) uint8 image, 1 to 4 channels (color and contrast: 1 or 3).
        fill: the colour of uncovered pixels: one value, or one per channel.
        nearest: geometric steps take the nearest neighbour, else bilinear.
        out: optional output of src's shape, apart from src.

    Returns:
        The result (``out`` when given; 2-D input gives (H, W, 1)) and the
        Pillow AFFINE data (6 float64) of the map the step applied, None
        when it moved no pixel.
    """
    return _step("policy_step", op, magnitude, src, fill, nearest, out)


def timm_step(op: TimmOp | int, argument: float, src: Any, fill: Any = 0, nearest: bool = False,
              out: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
    """One step of timm's RandAugment: the pixels of its operation ``op``
    (a :class:`TimmOp`) with ``argument`` (``slip_timm_step``); otherwise
    as :func:`policy_step`."""
    return _step("timm_step", op, argument, src, fill, nearest, out)


def _samples(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    """Two C-contiguous samples of one shape and dtype."""
    x, y = _as_array(a, "a"), _as_array(b, "b")
    if x.shape != y.shape or x.dtype != y.dtype:
        raise ArgumentError(f"a and b must have one shape and dtype, got {x.dtype}{list(x.shape)} and "
                            f"{y.dtype}{list(y.shape)}")
    if not (x.flags.c_contiguous and y.flags.c_contiguous):
        raise ArgumentError("a and b must be C-contiguous")
    return x, y


def _sample_out(out: Any, like: np.ndarray) -> np.ndarray:
    """A caller's output sample, of ``like``'s shape and dtype, C-contiguous; a new one for None."""
    if out is None:
        return np.empty_like(like, order="C")
    arr = _writable(_as_array(out, "out"), "out")
    if arr.shape != like.shape or arr.dtype != like.dtype or not arr.flags.c_contiguous:
        raise ArgumentError(f"out must be a C-contiguous {like.dtype}{list(like.shape)} array, got "
                            f"{arr.dtype}{list(arr.shape)}")
    return arr


def mix_blend(a: Any, b: Any, lam: float, out: Any = None) -> np.ndarray:
    """MixUp's blend of a sample: ``lam * a + (1 - lam) * b`` in double
    precision, uint8 rounded half to even and clipped, float32 rounded
    (``slip_mix_blend``).

    Args:
        a, b: C-contiguous uint8 or float32 arrays of one shape.
        lam: the weight of ``a``, finite.
        out: optional output of their shape and dtype; may be ``a`` or ``b``.

    Returns:
        The blend (``out`` when given).
    """
    x, y = _samples(a, b)
    codes = {np.dtype(np.uint8): Dtype.UINT8, np.dtype(np.float32): Dtype.FLOAT32}
    if x.dtype not in codes:
        raise ArgumentError(f"mix_blend blends uint8 or float32 samples, got {x.dtype}")
    arr = _sample_out(out, x)
    status = _calls.slip_mix_blend(x.ctypes.data, x.nbytes, y.ctypes.data, y.nbytes, arr.ctypes.data, arr.nbytes,
                                   x.size, int(codes[x.dtype]), float(lam))
    _check(status, "mix_blend", ArgumentError)
    return arr


def mix_paste(a: Any, b: Any, top: int, left: int, bottom: int, right: int, channels_first: bool = False,
              out: Any = None) -> np.ndarray:
    """CutMix's paste of a sample: ``a`` with rows ``top:bottom`` and
    columns ``left:right`` taken from ``b`` (``slip_mix_paste``).

    Args:
        a, b: C-contiguous arrays of one shape and dtype: (H, W), (H, W, C),
            or (C, H, W) with ``channels_first``.
        top, left, bottom, right: the box, inside the image; an empty one pastes nothing.
        channels_first: a 3-D sample is (C, H, W) planes, else (H, W, C) pixels.
        out: optional output of their shape and dtype, apart from both.

    Returns:
        The sample with the box pasted (``out`` when given).
    """
    x, y = _samples(a, b)
    if x.ndim not in (2, 3) or x.size == 0:
        raise ArgumentError(f"mix_paste takes (H, W), (H, W, C) or (C, H, W) samples, got {list(x.shape)}")
    item = x.itemsize
    if x.ndim == 2:
        planes, (h, w), pixel = 1, x.shape, item
    elif channels_first:
        (planes, h, w), pixel = x.shape, item
    else:
        planes, (h, w, c) = 1, x.shape
        pixel = c * item
    arr = _sample_out(out, x)
    status = _calls.slip_mix_paste(x.ctypes.data, x.nbytes, y.ctypes.data, y.nbytes, arr.ctypes.data, arr.nbytes,
                                   planes, h, w, pixel, top, left, bottom, right)
    _check(status, "mix_paste", ArgumentError)
    return arr


# ---------------------------------------------------------------- encoding, I/O


def jpeg_encode_bound(height: int, width: int, channels: int) -> int:
    """Upper bound of :func:`jpeg_encode`'s output size (``slip_jpeg_encode_bound``)."""
    return int(_calls.slip_jpeg_encode_bound(height, width, channels))


def jpeg_encode(
    src: Any,
    quality: int = 90,
    subsampling: Subsampling | int = Subsampling.S420,
    flags: EncodeFlags | int = EncodeFlags.DEFAULT,
    out: Any = None,
) -> bytes | memoryview:
    """Compress an (H, W) grayscale or (H, W, 3) RGB uint8 image to JPEG
    (``slip_jpeg_encode``).

    Args:
        src: the image.
        quality: 1 .. 100.
        subsampling: :class:`Subsampling` (444, 422, 420, 440) for RGB; ignored
            for grayscale.
        flags: :class:`EncodeFlags` (``PROGRESSIVE``, ``OPTIMIZE``, ``ARITHMETIC``).
        out: optional writable buffer; :func:`jpeg_encode_bound` bytes always suffice.

    Returns:
        The JPEG as ``bytes``, or, when ``out`` is given, a memoryview of the
        part of ``out`` that holds it.
    """
    img = _image_arg(src, "src", (1, 3))
    h, w, c = img.shape
    if c == 1:
        subsampling = Subsampling.GRAY
    buf = (
        np.empty(jpeg_encode_bound(h, w, c), np.uint8)
        if out is None
        else _writable(_bytes_arg(out, "out"), "out")
    )
    size = ctypes.c_size_t(0)
    status = _calls.slip_jpeg_encode(
        img.ctypes.data, h, w, c, img.strides[0], quality, int(subsampling), int(flags), buf.ctypes.data, buf.size,
        ctypes.addressof(size),
    )
    _check(status, "jpeg_encode", EncodeError)
    if out is None:
        return buf[: size.value].tobytes()
    return memoryview(buf)[: size.value]


def jpeg_add_restart_markers(data: Any, interval_width: int = 32) -> bytes:
    """Losslessly re-code a JPEG into independently decodable tiles
    (``slip_jpeg_add_restart_markers``).

    The quantized DCT coefficients are kept, so the decoded pixels do not
    change; they are coded as one baseline scan with a restart marker every
    tile of whole MCUs, at most ``interval_width`` pixels wide.
    :func:`jpeg_decode` and :func:`jpeg_decode_crop_resize` then
    entropy-decode only the tiles a region touches.  A sequential JPEG
    whose AC Huffman tables were counted for it (an encoder's optimized
    tables) keeps them and the bits of every block's AC coefficients, and
    is re-coded at little more than the cost of reading its Huffman codes
    once; any other JPEG (general-purpose tables, progressive) is coded with
    tables counted for its coefficients, which costs several times more.
    Metadata markers other than JFIF and Adobe are dropped.

    Args:
        data: the compressed bytes.
        interval_width: widest tile, in pixels.

    Returns:
        The re-coded JPEG.

    Raises:
        DecodeError: bad, truncated, unsupported or oversized JPEG; status
            ``EUNSUPPORTED`` also for a progressive JPEG whose scans leave
            coefficients incomplete, which :func:`jpeg_decode` decodes with
            block smoothing that re-coded tiles would not get, and for one
            with coefficients wider than baseline JPEG codes.
        ArgumentError: ``interval_width`` is not positive.
    """
    buf = _bytes_arg(data, "data")
    size = ctypes.c_size_t(0)
    out = np.empty(buf.size + buf.size // 4 + 65536, np.uint8)
    for _ in range(2):  # the first size is an estimate; the call reports the exact one
        status = _calls.slip_jpeg_add_restart_markers(
            buf.ctypes.data, buf.size, int(interval_width), out.ctypes.data, out.size, ctypes.addressof(size)
        )
        if status != Status.EBUFFER:
            break
        out = np.empty(size.value, np.uint8)
    _check(status, "jpeg_add_restart_markers")
    return out[: size.value].tobytes()


# ---------------------------------------------------------------- limits


LIMIT_VARIABLES = {Limit.SCANS: "SLIPSTREAM_MAX_SCANS", Limit.PIXELS: "SLIPSTREAM_MAX_PIXELS",
                   Limit.PASSES: "SLIPSTREAM_MAX_PASSES", Limit.VIDEO_DECODES: "SLIPSTREAM_MAX_VIDEO_DECODES"}
"""The environment variable that sets each limit when this module is imported
(so that worker processes, spawned or forked, start with the same limits)."""


def set_limit(limit: Limit | int, value: int) -> None:
    """Set a decoding limit for the whole process (``slip_set_limit``).

    Every decode of a JPEG beyond a limit fails with :class:`DecodeError`
    (status ``ETOOBIG``) naming it: ``Limit.SCANS`` (default
    ``DEFAULT_MAX_SCANS``, 100) bounds the scans of progressive JPEGs, whose
    number a hostile file can multiply at no cost in size;
    ``Limit.PASSES`` (default ``DEFAULT_MAX_PASSES``, 12) bounds the work of
    all the scans together, in passes over the image's blocks (libjpeg's
    progressive JPEGs take 5.3 to 6, a baseline one 1), so that a large
    image's scans cannot cost seconds before the scan limit is reached;
    ``Limit.PIXELS`` (default ``DEFAULT_MAX_PIXELS``, 16384 x 16384) bounds
    the image size, and a video's frame size too; ``Limit.VIDEO_DECODES``
    (default ``DEFAULT_MAX_VIDEO_DECODES``, 4096) bounds the frames one
    video decoding call may decode, from its keyframe on.  The environment
    variables of :data:`LIMIT_VARIABLES` set them when slipstream is
    imported.

    Raises:
        ArgumentError: an unknown limit or a value below 1.
    """
    _check(_calls.slip_set_limit(int(limit), int(value)), "set_limit", ArgumentError)


def get_limit(limit: Limit | int) -> int:
    """The current value of a decoding limit (``slip_get_limit``)."""
    value = _calls.slip_get_limit(int(limit))
    if value < 0:
        _check(int(value), "get_limit", ArgumentError)
    return int(value)


def _limits_from_environment() -> None:
    for limit, variable in LIMIT_VARIABLES.items():
        text = os.environ.get(variable)
        if text is None:
            continue
        try:
            set_limit(limit, int(text.replace("_", "")))
        except (ValueError, ArgumentError):
            raise ArgumentError(f"the environment variable {variable}={text!r} is not a whole number of at least "
                                f"1") from None


# ---------------------------------------------------------------- video


def video_available() -> bool:
    """Whether this build decodes video: it was built with FFmpeg's
    libavformat and libavcodec (``slip_video_available``)."""
    return bool(_calls.slip_video_available())


class VideoInfo(NamedTuple):
    """A video's first video stream, as :func:`video_index` reads it."""

    height: int
    width: int
    frames: int
    keyframes: int
    codec: VideoCodec
    colour: VideoColour
    yuv420: bool
    time_base: tuple[int, int]
    """The unit of the timestamps: ``time_base[0] / time_base[1]`` seconds."""


def video_index(data: Any) -> tuple[VideoInfo, np.ndarray, np.ndarray]:
    """Index a video's container without decoding a frame
    (``slip_video_index``): its facts, and per frame, in presentation order,
    its timestamp and the timestamp of the keyframe decoding starts at to
    reach it.

    Returns:
        ``(info, pts, seek)``: pts and seek int64 arrays of ``info.frames``
        timestamps in units of ``info.time_base``.

    Raises:
        DecodeError: data no demuxer reads, no video stream, frames without
            or with repeated timestamps (``ECORRUPT``), a codec this build
            cannot decode or a build without FFmpeg (``EUNSUPPORTED``), frames
            beyond ``MAX_DIMENSION`` or ``Limit.PIXELS`` (``ETOOBIG``).
    """
    buf = _bytes_arg(data, "data")
    info = np.zeros((), VIDEO_INFO_DTYPE)
    _check(_calls.slip_video_index(buf.ctypes.data, buf.size, info.ctypes.data, None, None, 0), "video_index")
    frames = int(info["frames"])
    pts, seek = np.empty(frames, np.int64), np.empty(frames, np.int64)
    _check(_calls.slip_video_index(buf.ctypes.data, buf.size, info.ctypes.data, pts.ctypes.data, seek.ctypes.data,
                                   frames), "video_index")
    facts = VideoInfo(int(info["height"]), int(info["width"]), frames, int(info["keyframes"]),
                      VideoCodec(int(info["codec"])), VideoColour(int(info["colour"])), bool(info["yuv420"]),
                      (int(info["time_base_num"]), int(info["time_base_den"])))
    return facts, pts, seek


def _timestamps(pts: Any, seek: Any) -> tuple[np.ndarray, np.ndarray]:
    pts, seek = np.ascontiguousarray(pts, np.int64).reshape(-1), np.ascontiguousarray(seek, np.int64).reshape(-1)
    if pts.shape != seek.shape:
        raise ArgumentError(f"pts and seek must have one entry per frame, got {pts.size} and {seek.size}")
    return pts, seek


def video_decode_crop_resize(
    data: Any,
    pts: Any,
    seek: Any,
    height: int,
    width: int,
    y: int,
    x: int,
    h: int,
    w: int,
    out_h: int,
    out_w: int,
    flags: DecodeFlags | int = DecodeFlags.DEFAULT,
    interp: Interp | int = Interp.BILINEAR,
    out: Any = None,
) -> np.ndarray:
    """Decode the frames at timestamps ``pts`` (with their keyframes'
    ``seek``, from :func:`video_index`), crop each to (y, x, h, w), resize
    it to out_h x out_w and convert it to RGB
    (``slip_video_decode_crop_resize``): one crop for the whole window.

    Args:
        data: the container's bytes.
        pts, seek: the frames' timestamps and their keyframes' (int64).
        height, width: the frames' size, as :func:`video_index` gave it.
        y, x, h, w: the crop, in pixels of the frames.
        out_h, out_w: output size.
        flags: :class:`DecodeFlags`; ``FLIP_X`` mirrors every frame.
        interp: :class:`Interp` filter.
        out: optional (frames, out_h, out_w, 3) uint8 array to write into.

    Returns:
        The (frames, out_h, out_w, 3) uint8 frames (``out`` when given).

    Raises:
        DecodeError: the stream does not decode, lacks a timestamp, ends
            early, or its frames are not 8-bit 4:2:0 (see the C function).
        ArgumentError: timestamps out of order, a crop outside the frames,
            a bad size, filter or ``out``.
    """
    buf = _bytes_arg(data, "data")
    pts, seek = _timestamps(pts, seek)
    shape = (pts.size, out_h, out_w, 3)
    if out is None:
        arr = np.empty(shape, np.uint8)
    else:
        arr = _writable(_as_array(out, "out"), "out")
        if arr.shape != shape or arr.dtype != np.uint8 or not arr.flags.c_contiguous:
            raise ArgumentError(f"out must be a contiguous uint8 array of shape {shape}, got {arr.shape} {arr.dtype}")
    status = _calls.slip_video_decode_crop_resize(
        buf.ctypes.data, buf.size, pts.ctypes.data, seek.ctypes.data, pts.size, height, width, y, x, h, w, out_h,
        out_w, int(flags), int(interp), arr.ctypes.data, arr.nbytes, out_h * out_w * 3, out_w * 3)
    _check(status, "video_decode_crop_resize")
    return arr


def video_decode_planes(data: Any, pts: Any, seek: Any, height: int, width: int) -> np.ndarray:
    """Decode the frames at timestamps ``pts`` into their YCbCr 4:2:0 planes,
    the decoder's own samples (``slip_video_decode_planes``).

    Returns:
        A (frames, :func:`planes_bytes`) uint8 array.

    Raises:
        DecodeError, ArgumentError: as :func:`video_decode_crop_resize`.
    """
    buf = _bytes_arg(data, "data")
    pts, seek = _timestamps(pts, seek)
    arr = np.empty((pts.size, planes_bytes(height, width)), np.uint8)
    status = _calls.slip_video_decode_planes(buf.ctypes.data, buf.size, pts.ctypes.data, seek.ctypes.data, pts.size,
                                             height, width, arr.ctypes.data, arr.nbytes)
    _check(status, "video_decode_planes")
    return arr


# ---------------------------------------------------------------- files


def crc32(data: Any, crc: int = 0) -> int:
    """CRC-32 of ``data`` continuing ``crc``, equal to ``zlib.crc32(data, crc)``
    (``slip_crc32``), several times faster where the processor has
    carry-less multiplication."""
    buf = _bytes_arg(data, "data")
    return int(_calls.slip_crc32(buf.ctypes.data, buf.size, int(crc) & 0xFFFFFFFF))


def guard_mapping(mapping: Any) -> int:
    """Protect the memory mapping behind ``mapping`` (an array or buffer
    covering all of it) from its file being truncated (``slip_guard_mapping``):
    pages lost to truncation then read as zeros instead of killing the
    process with SIGBUS, and :func:`guard_faults` counts them.

    Returns:
        The guard's number, for :func:`guard_faults` and :func:`unguard_mapping`.

    Raises:
        SlipstreamError: no guard is free (65536 are in use) or the handler cannot be installed.
    """
    buf = _bytes_arg(mapping, "mapping")
    guard = ctypes.c_int32(-1)
    _check(_calls.slip_guard_mapping(buf.ctypes.data, buf.size, ctypes.addressof(guard)), "guard_mapping",
           SlipstreamError)
    return guard.value


def guard_faults(guard: int) -> int:
    """Pages of a guarded mapping lost to truncation so far (``slip_guard_faults``)."""
    value = _calls.slip_guard_faults(int(guard))
    if value < 0:
        _check(int(value), "guard_faults", ArgumentError)
    return int(value)


def unguard_mapping(guard: int) -> None:
    """Stop guarding a mapping, before it is unmapped (``slip_unguard_mapping``)."""
    _check(_calls.slip_unguard_mapping(int(guard)), "unguard_mapping", ArgumentError)


def range_reserve(length: int) -> int:
    """Reserve ``length`` bytes of address space, mapped to nothing yet
    (``slip_range_reserve``): the first address, for :func:`range_map_file`,
    :func:`range_map_memory`, :func:`range_release` and :func:`range_free`.

    Raises:
        ArgumentError: ``length`` is not a whole number of OS pages.
        NativeMemoryError: the address space is short (a virtual-memory limit, ``ulimit -v``).
        NativeIOError: the OS refuses otherwise.
    """
    base = ctypes.c_uint64(0)
    _check(_calls.slip_range_reserve(int(length), ctypes.addressof(base)), "range_reserve", NativeIOError)
    return base.value


def range_map_file(address: int, length: int, fd: int, offset: int, populate: bool = False) -> None:
    """Map ``length`` bytes of file ``fd`` from ``offset`` on, read-only, at
    ``address`` in a reserved range (``slip_range_map_file``); ``populate``
    reads them in now.

    Raises:
        ArgumentError: an address, length or offset that is not whole OS pages.
        NativeIOError: the OS refuses the mapping.
    """
    _check(_calls.slip_range_map_file(int(address), int(length), int(fd), int(offset), int(bool(populate))),
           "range_map_file", NativeIOError)


def range_map_memory(address: int, length: int, writable: bool) -> None:
    """Map zeroed private memory at ``address`` in a reserved range
    (``slip_range_map_memory``): read-only zeros, or a writable slot.

    Raises:
        ArgumentError: an address or length that is not whole OS pages.
        NativeIOError: the OS refuses the mapping.
    """
    _check(_calls.slip_range_map_memory(int(address), int(length), int(bool(writable))), "range_map_memory", NativeIOError)


def range_release(address: int, length: int) -> None:
    """Make ``length`` bytes at ``address`` reserved address space again,
    letting go of what was mapped there (``slip_range_release``).

    Raises:
        ArgumentError: an address or length that is not whole OS pages.
        NativeIOError: the OS refuses.
    """
    _check(_calls.slip_range_release(int(address), int(length)), "range_release", NativeIOError)


def range_free(address: int, length: int) -> None:
    """Unmap a whole reserved range (``slip_range_free``); unguard it first.

    Raises:
        ArgumentError: an address or length that is not whole OS pages.
        NativeIOError: the OS refuses.
    """
    _check(_calls.slip_range_free(int(address), int(length)), "range_free", NativeIOError)


def pread(fd: int, buf: Any, offset: int) -> None:
    """Fill ``buf`` with the bytes of file descriptor ``fd`` starting at
    ``offset`` (``slip_pread``).

    Raises:
        NativeIOError: an OS error, or the file ends before ``buf`` is full.
    """
    arr = _writable(_bytes_arg(buf, "buf"), "buf")
    _check(_calls.slip_pread(int(fd), arr.ctypes.data, arr.size, int(offset)), "pread", NativeIOError)


_limits_from_environment()

__all__ = [
    "ABI_VERSION",
    "DEFAULT_MAX_PIXELS",
    "DEFAULT_MAX_SCANS",
    "JPEG_INFO_DTYPE",
    "LIMIT_VARIABLES",
    "Colorspace",
    "DecodeFlags",
    "Dtype",
    "EncodeFlags",
    "Interp",
    "JpegInfo",
    "Limit",
    "Primitive",
    "Status",
    "Subsampling",
    "TimmOp",
    "VideoCodec",
    "VideoColour",
    "VideoInfo",
    "abi_version",
    "autocontrast",
    "brightness",
    "color",
    "contrast",
    "crc32",
    "equalize",
    "get_limit",
    "guard_faults",
    "guard_mapping",
    "invert",
    "jpeg_add_restart_markers",
    "jpeg_decode",
    "jpeg_decode_crop_resize",
    "jpeg_encode",
    "jpeg_encode_bound",
    "jpeg_info",
    "jpeg_scale_for",
    "last_error",
    "lib",
    "mix_blend",
    "mix_paste",
    "pack",
    "policy_step",
    "posterize",
    "pread",
    "range_free",
    "range_map_file",
    "range_map_memory",
    "range_release",
    "range_reserve",
    "resize",
    "scaled_region",
    "set_limit",
    "sharpness",
    "solarize",
    "strerror",
    "timm_step",
    "unguard_mapping",
    "version",
    "video_available",
    "video_decode_crop_resize",
    "video_decode_planes",
    "video_index",
    "warp_affine",
    "warp_perspective",
]
