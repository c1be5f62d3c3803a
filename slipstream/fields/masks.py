"""Segmentation masks: one class id per pixel (:class:`SegmentationMaskField`)
and any number of binary instance masks per sample
(:class:`InstanceMasksField`), stored losslessly and decoded by compiled
functions straight onto the pixel grid of a transformed image.

Storage
-------
Masks are run-length coded row by row, and a row that keeps the classes and
the number of runs of the row above is stored as the small shifts of its run
boundaries (half a byte each), with a table of where every block of rows
starts.  On masks like real annotations this is smaller than both PNG and
COCO's RLE, and it decodes many times faster than either, because a crop
reads only the blocks of the rows it samples and runs expand with no entropy
decoding (``benchmarks/masks.py`` measures the three).

A *plane* is a rectangle of ``rows x cols`` values coded that way: a table
of ``ceil(rows / 2**block_shift)`` (blocks of 32 rows: the block shift is
5) little-endian uint32 offsets (from the
start of the sample's bytes) of the first row of each block, then the rows.
Each row starts with a LEB128 varint header ``h``:

* ``h = 0``: the same runs as the row above;
* ``h = 1``: the same run values as the row above, and each of its ``k - 1``
  inner run boundaries moved by -8 to 7 columns: ``ceil((k - 1) / 2)``
  bytes of 4-bit two's-complement shifts, the first in the low half;
* ``h = 2 m`` (``m >= 1``): a literal row.  With value bytes (semantic
  masks) it has ``k = m`` runs, each a varint length and then its value in
  1 or 2 little-endian bytes.  Binary planes (instances) store no values:
  runs alternate between 0 and 1, ``k = (m + 1) // 2`` and the first run's
  value is ``1 - m % 2``; the ``k`` varint lengths follow.

The first row of a block is always literal, so a decoder can start at any
block.  Run lengths are at least 1 and add up to ``cols``.

A semantic mask is one plane of the whole image after a 16-byte header:
``b"SM"``, version 1, value bytes (1 or 2), block shift, three zero bytes,
uint32 height, uint32 width.  Instance masks are a 20-byte header
(``b"SI"``, version 1, 0, block shift, three zero bytes, uint32 height,
width and count), then per instance its plane's offset (uint32) and its
bounding box: top, left, rows, cols (uint16 each; rows = cols = 0 for an
empty mask), then the planes: each instance is a binary plane of its own
bounding box, so instances may overlap and small ones stay small.

Geometry
--------
The compiled decoders sample the mask on the grid of a transformed image,
the transform of :mod:`slipstream.fields.geometry`.  Through an axis-aligned
transform output pixel ``(i, j)`` takes stored pixel ``(floor((i + 0.5 -
offset_y) / scale_y), floor((j + 0.5 - offset_x) / scale_x))`` (nearest
neighbour), computed in exactly that order of float64 operations, reading
only the rows it samples.  Through any other it takes the stored pixel
containing ``(u / w, v / w)`` as (x, y), with ``(u, v, w)`` the inverse
matrix (:func:`geometry.inverse`) times ``(j + 0.5, i + 0.5, 1)`` (each sum
left to right), after decoding the plane whole.  Where that lies outside
the mask (or ``w <= 0``) the output is ``fill`` (0 for instances).
:func:`crop_transform` makes the transform of a crop box, and
:func:`resample_nearest` is the NumPy reference of the decoders.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from numba import int64, uint64

from slipstream.compiler.jit import cached_njit
from slipstream.errors import DecodeError
from slipstream.fields import geometry
from slipstream.fields.base import Encoded, Field
from slipstream.native import Status

__all__ = ["InstanceMasksField", "SegmentationMaskField", "crop_transform", "decode_instances", "decode_mask",
           "encode_instances", "encode_mask", "resample_nearest"]

MAX_SIDE = 65535
"""The largest height or width of a stored mask, in pixels."""

BLOCK_SHIFT = 5
"""Blocks of ``2**BLOCK_SHIFT`` rows (32): the granularity of row access."""

SEMANTIC_MAGIC = b"SM"
INSTANCES_MAGIC = b"SI"
VERSION = 1
SEMANTIC_HEADER = 16
"""Bytes before a semantic mask's block table."""
INSTANCES_HEADER = 20
"""Bytes before an instance table."""
INSTANCE_ENTRY = 12
"""Bytes per instance in the instance table: offset, top, left, rows, cols."""

_CHUNK_PIXELS = 1 << 20  # rows coded at once: bounds the encoder's memory on huge masks

_OK = int(Status.OK)
_EINVAL = int(Status.EINVAL)
_ECORRUPT = int(Status.ECORRUPT)
_ETRUNCATED = int(Status.ETRUNCATED)


# ==================================================================== encoding


def _varint_sizes(values: np.ndarray) -> np.ndarray:
    """Bytes of the LEB128 varint of each value (all below 2**21)."""
    return 1 + (values >= 1 << 7).astype(np.int64) + (values >= 1 << 14)


def _put_varints(buf: np.ndarray, at: np.ndarray, values: np.ndarray, sizes: np.ndarray) -> None:
    """Write the varint of ``values[i]`` (``sizes[i]`` bytes) at ``buf[at[i]:]``."""
    values = values.astype(np.int64)
    for b in range(3):
        sel = sizes > b
        more = np.where(sizes[sel] > b + 1, 0x80, 0)
        buf[at[sel] + b] = ((values[sel] >> (7 * b)) & 0x7F) | more


def _encode_rows(plane: np.ndarray, value_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """The coded rows of ``plane`` (whose first row starts a block) and the
    offset of each row in them: ``(bytes, row_offsets)``.

    ``value_bytes`` is 0 for a binary plane (values 0 and 1), else 1 or 2.
    """
    rows, cols = plane.shape
    # Runs, in row-major order: the row of each, where it starts and ends, its value.
    inner_rows, inner_cols = np.nonzero(plane[:, 1:] != plane[:, :-1])
    k = np.bincount(inner_rows, minlength=rows).astype(np.int64) + 1
    first = np.cumsum(k) - k
    run_row = np.repeat(np.arange(rows), k)
    start = np.zeros(len(run_row), np.int64)
    start[np.arange(len(inner_rows)) + inner_rows + 1] = inner_cols + 1  # boundary j of row r is run j + r + 1
    end = np.append(start[1:], cols)
    end[first + k - 1] = cols
    values = plane[run_row, start].astype(np.int64)
    lengths = end - start

    # A row may repeat the row above, or shift its boundaries, only inside a block.
    index = np.arange(rows)
    candidate = np.zeros(rows, bool)
    candidate[1:] = k[1:] == k[:-1]
    candidate &= index % (1 << BLOCK_SHIFT) != 0
    runs = np.flatnonzero(candidate[run_row])
    above = runs - k[run_row[runs]]  # the same run of the row above
    shift = end[runs] - end[above]
    mismatch = (values[runs] != values[above]) | (shift < -8) | (shift > 7)
    unfit = np.bincount(run_row[runs], weights=mismatch, minlength=rows) > 0
    moved = np.bincount(run_row[runs], weights=shift != 0, minlength=rows) > 0
    repeat = candidate & ~unfit & ~moved
    delta = candidate & ~unfit & moved
    literal = ~(repeat | delta)

    if value_bytes == 0:
        header = np.where(literal, 2 * (2 * k - 1 + values[first]), delta.astype(np.int64))
    else:
        header = np.where(literal, 2 * k, delta.astype(np.int64))
    header_size = _varint_sizes(header)
    length_size = _varint_sizes(lengths)
    run_size = length_size + value_bytes
    payload = np.where(literal, np.add.reduceat(run_size, first), np.where(delta, k // 2, 0))
    row_size = header_size + payload
    row_offset = np.cumsum(row_size) - row_size
    buf = np.zeros(int(row_size.sum()), np.uint8)
    _put_varints(buf, row_offset, header, header_size)

    # Literal rows: a varint length (and a value) per run.
    in_row = np.cumsum(run_size) - run_size
    in_row -= in_row[first][run_row]
    lit = np.flatnonzero(literal[run_row])
    at = row_offset[run_row[lit]] + header_size[run_row[lit]] + in_row[lit]
    _put_varints(buf, at, lengths[lit], length_size[lit])
    for b in range(value_bytes):
        buf[at + length_size[lit] + b] = (values[lit] >> (8 * b)) & 0xFF

    # Shifted rows: the inner boundaries' shifts, two to a byte.
    inner = runs[delta[run_row[runs]] & (end[runs] != cols)]
    t = inner - first[run_row[inner]]
    at = row_offset[run_row[inner]] + 1 + t // 2
    nibble = (end[inner] - end[inner - k[run_row[inner]]]) & 0xF
    low = t % 2 == 0
    buf[at[low]] = nibble[low]
    buf[at[~low]] |= (nibble[~low] << 4).astype(np.uint8)
    return buf, row_offset


def _encode_plane(plane: np.ndarray, value_bytes: int, base: int) -> list[np.ndarray]:
    """The pieces of bytes of one plane: its block table (offsets counted from
    the sample's start, where the plane begins at ``base``), then its rows."""
    rows, cols = plane.shape
    block = 1 << BLOCK_SHIFT
    blocks = (rows + block - 1) // block
    chunk = max(block, _CHUNK_PIXELS // cols // block * block)  # whole blocks, so each chunk starts literal
    pieces, offsets, done = [], [], base + 4 * blocks
    for top in range(0, rows, chunk):
        coded, row_offset = _encode_rows(plane[top:top + chunk], value_bytes)
        offsets.append(done + row_offset[::block])
        pieces.append(coded)
        done += len(coded)
    if done > 0xFFFFFFFF:
        raise ValueError(f"the mask codes to {done:,} bytes, over the 4 GiB a stored mask may hold")
    return [np.concatenate(offsets).astype("<u4").view(np.uint8), *pieces]


def _check_side(height: int, width: int) -> None:
    if not (1 <= height <= MAX_SIDE and 1 <= width <= MAX_SIDE):
        raise ValueError(f"a mask must be 1 to {MAX_SIDE} pixels high and wide, got {height}x{width}")


def _integer_array(value: Any, what: str) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind not in "biu":
        raise TypeError(f"{what} must be an integer or bool array, got dtype {array.dtype} (class ids and instance "
                        f"masks are integers: round float masks yourself)")
    return array


def encode_mask(mask: Any) -> bytes:
    """The stored bytes of a semantic mask (see the module docstring).

    Args:
        mask: (H, W) integer or bool array of class ids from 0 to 65535,
            1 to 65535 pixels high and wide.  Values up to 255 take one byte
            per run, larger ones two.

    Returns:
        The coded mask: decode it with :func:`decode_mask`.

    Raises:
        TypeError: ``mask`` is not an integer or bool array.
        ValueError: it is not 2-D, its size or its values are out of range.
    """
    array = _integer_array(mask, "a segmentation mask")
    if array.ndim != 2:
        raise ValueError(f"a segmentation mask is a (height, width) array, got shape {array.shape}")
    height, width = array.shape
    _check_side(height, width)
    low, high = int(array.min()), int(array.max())
    if low < 0 or high > 0xFFFF:
        raise ValueError(f"segmentation mask values must lie in 0..65535, got {low if low < 0 else high}")
    value_bytes = 1 if high <= 0xFF else 2
    header = np.zeros(SEMANTIC_HEADER, np.uint8)
    header[:2] = np.frombuffer(SEMANTIC_MAGIC, np.uint8)
    header[2:5] = VERSION, value_bytes, BLOCK_SHIFT
    header[8:16] = np.array([height, width], "<u4").view(np.uint8)
    return b"".join(p.tobytes() for p in [header, *_encode_plane(array, value_bytes, SEMANTIC_HEADER)])


def encode_instances(masks: Any) -> bytes:
    """The stored bytes of a set of binary instance masks (see the module
    docstring): each is stored on its own, as its bounding box.

    Args:
        masks: (n, H, W) integer or bool array, nonzero inside an instance;
            ``n >= 0``, H and W from 1 to 65535.

    Returns:
        The coded masks: decode them with :func:`decode_instances`.

    Raises:
        TypeError: ``masks`` is not an integer or bool array.
        ValueError: it is not 3-D or its size is out of range.
    """
    array = _integer_array(masks, "instance masks")
    if array.ndim != 3:
        raise ValueError(f"instance masks are an (instances, height, width) array, got shape {array.shape}")
    count, height, width = array.shape
    _check_side(height, width)
    if count > 0xFFFFFFFF:
        raise ValueError(f"at most 2**32 - 1 instances per sample, got {count}")
    inside = array != 0
    rows_hit, cols_hit = inside.any(axis=2), inside.any(axis=1)
    table = np.zeros(count, np.dtype([("offset", "<u4"), ("top", "<u2"), ("left", "<u2"), ("rows", "<u2"),
                                      ("cols", "<u2")]))
    pieces, done = [], INSTANCES_HEADER + INSTANCE_ENTRY * count
    for n in range(count):
        if not rows_hit[n].any():
            continue  # an empty mask: no plane, a zero box
        top, left = int(np.argmax(rows_hit[n])), int(np.argmax(cols_hit[n]))
        bottom, right = height - int(np.argmax(rows_hit[n][::-1])), width - int(np.argmax(cols_hit[n][::-1]))
        plane = inside[n, top:bottom, left:right].view(np.uint8)
        table[n] = done, top, left, bottom - top, right - left
        coded = _encode_plane(plane, 0, done)
        pieces += coded
        done += sum(len(p) for p in coded)
        if done > 0xFFFFFFFF:
            raise ValueError("the masks code to over the 4 GiB a sample's instance masks may hold")
    header = np.zeros(INSTANCES_HEADER, np.uint8)
    header[:2] = np.frombuffer(INSTANCES_MAGIC, np.uint8)
    header[2:5] = VERSION, 0, BLOCK_SHIFT
    header[8:20] = np.array([height, width, count], "<u4").view(np.uint8)
    return b"".join(p.tobytes() for p in [header, table.view(np.uint8), *pieces])


# ==================================================================== geometry


def crop_transform(top: float, left: float, height: float, width: float, out_height: int, out_width: int,
                   flip: bool = False) -> np.ndarray:
    """The transform (see the module docstring) that maps the box of
    ``height x width`` pixels at ``(top, left)`` of a stored mask onto an
    ``out_height x out_width`` output, mirrored left to right when ``flip``.

    Args:
        top, left: the box's corner in the stored mask, in pixels (may be
            fractional, or outside the mask: the output is ``fill`` there).
        height, width: the box's size in pixels, above 0.
        out_height, out_width: the output's size in pixels.
        flip: mirror the output horizontally.

    Returns:
        float64 transform of :mod:`slipstream.fields.geometry` (``SIZE`` values).

    Raises:
        ValueError: a size is not positive.
    """
    if not (height > 0 and width > 0 and out_height >= 0 and out_width >= 0):
        raise ValueError(f"a crop box needs a positive size and the output a non-negative one, got "
                         f"{height}x{width} onto {out_height}x{out_width}")
    transform = np.empty(geometry.SIZE)
    geometry.set_region(transform, top, left, height, width, out_height, out_width, bool(flip))
    return transform


def resample_nearest(mask: np.ndarray, transform: Any, fill: int = 0) -> np.ndarray:
    """The NumPy reference of the compiled decoders: ``mask`` sampled on the
    output grid of ``transform`` (see the module docstring).

    Args:
        mask: (H, W) array.
        transform: a transform of :mod:`slipstream.fields.geometry`.
        fill: the value of output pixels that fall outside ``mask``.

    Returns:
        (out_h, out_w) array of ``mask``'s dtype.
    """
    t = np.asarray(transform, np.float64)
    out_h, out_w = int(t[geometry.OUT_H]), int(t[geometry.OUT_W])
    out = np.full((out_h, out_w), fill, mask.dtype)
    if geometry.is_axis_aligned(t):
        qy = (np.arange(out_h) + 0.5 - t[geometry.OFFSET_Y]) / t[geometry.SCALE_Y]
        qx = (np.arange(out_w) + 0.5 - t[geometry.OFFSET_X]) / t[geometry.SCALE_X]
        inside_y = (qy >= 0) & (qy < mask.shape[0])
        inside_x = (qx >= 0) & (qx < mask.shape[1])
        rows = np.floor(qy[inside_y]).astype(np.int64)
        cols = np.floor(qx[inside_x]).astype(np.int64)
        out[np.ix_(inside_y, inside_x)] = mask[np.ix_(rows, cols)]
        return out
    n = geometry.inverse(t, np.empty(geometry.MATRIX))
    yy, xx = np.mgrid[0:out_h, 0:out_w].astype(np.float64) + 0.5
    w = n[6] * xx + n[7] * yy + n[8]
    with np.errstate(divide="ignore", invalid="ignore"):
        x, y = (n[0] * xx + n[1] * yy + n[2]) / w, (n[3] * xx + n[4] * yy + n[5]) / w
    inside = (w > 0) & (x >= 0) & (x < mask.shape[1]) & (y >= 0) & (y < mask.shape[0])
    out[inside] = mask[np.floor(y[inside]).astype(np.int64), np.floor(x[inside]).astype(np.int64)]
    return out


# ==================================================================== decoding
# Every read of ``data`` is checked against its length first: the bytes may
# be corrupt.  Indices are int64 except in the fill loops, whose uint64
# indices let LLVM vectorize them (see slipstream.compiler.operation).


@cached_njit
def _u32(data, at):
    return (int64(data[at]) | (int64(data[at + 1]) << 8) | (int64(data[at + 2]) << 16)
            | (int64(data[at + 3]) << 24))


@cached_njit
def _u16(data, at):
    return int64(data[at]) | (int64(data[at + 1]) << 8)


@cached_njit
def _varint(data, at):
    """(value, next position), or (status, position) with a negative status
    for a varint that runs past the data or over 3 bytes."""
    value = int64(0)
    for b in range(3):
        if at >= len(data):
            return int64(_ETRUNCATED), at
        byte = int64(data[at])
        at += 1
        value |= (byte & 0x7F) << (7 * b)
        if byte < 0x80:
            return value, at
    return int64(_ECORRUPT), at


@cached_njit
def _fill(row, start, stop, value):
    for j in range(uint64(start), uint64(stop)):
        row[j] = value


@cached_njit
def _copy(dst, src):
    for j in range(uint64(dst.shape[0])):
        dst[j] = src[j]


@cached_njit
def _check_transform(transform, out_h, out_w):
    """0 when ``transform`` has ``geometry.SIZE`` values, a finite
    invertible matrix and the output size (out_h, out_w), else EINVAL."""
    if transform.shape[0] != geometry.SIZE:
        return _EINVAL
    for n in range(geometry.MATRIX):
        if not np.isfinite(transform[n]):
            return _EINVAL
    determinant = geometry.determinant(transform)
    if determinant == 0.0 or not np.isfinite(determinant):
        return _EINVAL
    if transform[geometry.OUT_H] != float(out_h) or transform[geometry.OUT_W] != float(out_w):
        return _EINVAL
    return _OK


@cached_njit
def _source(at, size, scale, offset):
    """The continuous source coordinate of output pixel ``at`` of ``size``
    along one axis, counted so that it grows with ``at`` (mirrored axes are
    walked from their end)."""
    if scale < 0.0:
        at = size - 1 - at
    return ((float(at) + 0.5) - offset) / scale


@cached_njit
def _first_at_least(bound, size, scale, offset):
    """The first ``at`` in 0..size whose source coordinate is >= ``bound``."""
    lo, hi = int64(0), int64(size)
    while lo < hi:
        mid = (lo + hi) >> 1
        if _source(mid, size, scale, offset) >= bound:
            hi = mid
        else:
            lo = mid + 1
    return lo


@cached_njit
def _column_table(scale, offset, out_w, left, cols, table):
    """Maps the plane's column boundaries to output columns, counted from the
    output's left edge, or its right one for a mirrored transform.

    Returns ``(lo, hi)``, the plane columns [lo, hi) that some output pixel
    samples, and fills ``table[b - lo]``, for b in lo..hi, with the first
    output column (so counted) whose source column is ``>= left + b``;
    ``lo == hi`` when no output pixel samples the plane."""
    first = _first_at_least(float(left), out_w, scale, offset)
    end = _first_at_least(float(left + cols), out_w, scale, offset)
    if first >= end:
        return int64(0), int64(0)
    lo = int64(np.floor(_source(first, out_w, scale, offset))) - left
    hi = int64(np.floor(_source(end - 1, out_w, scale, offset))) - left + 1
    table[0] = first
    at = first
    source = _source(at, out_w, scale, offset)
    for b in range(lo + 1, hi + 1):
        bound = float(left + b)
        while at < end and source < bound:
            at += 1
            source = _source(at, out_w, scale, offset)
        table[b - lo] = at
    return lo, hi


@cached_njit
def _next_row(data, at, value_bytes, cols, k, ends, values):
    """Decodes the row at ``data[at:]`` over the run list ``ends[:k]``,
    ``values[:k]`` of the row above (``k = 0`` at a block's start).

    Returns ``(status, next position, runs, changed)``: ``changed`` is
    False when the row repeats the row above."""
    header, at = _varint(data, at)
    if header < 0:
        return header, at, k, False
    if header == 0 or header == 1:
        if k == 0:  # a block starts with a literal row
            return int64(_ECORRUPT), at, k, False
        if header == 0:
            return int64(_OK), at, k, False
        if at + k // 2 > len(data):
            return int64(_ETRUNCATED), at, k, False
        previous = int64(0)
        for t in range(k - 1):
            nibble = (int64(data[at + (t >> 1)]) >> (4 * (t & 1))) & 0xF
            edge = ends[t] + (nibble - 16 if nibble >= 8 else nibble)
            if edge <= previous or edge >= cols:
                return int64(_ECORRUPT), at, k, False
            ends[t] = edge
            previous = edge
        return int64(_OK), at + k // 2, k, True
    if header & 1:
        return int64(_ECORRUPT), at, k, False
    m = header >> 1
    runs = m if value_bytes > 0 else (m + 1) >> 1
    if runs > cols:
        return int64(_ECORRUPT), at, k, False
    edge = int64(0)
    for t in range(runs):
        length, at = _varint(data, at)
        if length < 0:
            return length, at, k, False
        edge += length
        if length == 0 or edge > cols:
            return int64(_ECORRUPT), at, k, False
        ends[t] = edge
        if value_bytes == 0:
            values[t] = (1 - (m & 1) + t) & 1
        else:
            if at + value_bytes > len(data):
                return int64(_ETRUNCATED), at, k, False
            values[t] = int64(data[at]) if value_bytes == 1 else _u16(data, at)
            at += value_bytes
    if edge != cols:
        return int64(_ECORRUPT), at, k, False
    return int64(_OK), at, runs, True


@cached_njit
def _paint_row(row, k, ends, values, table, lo, hi, mirrored, outside):
    """Writes one output row from a run list, through the column table of
    :func:`_column_table`; ``outside`` where the row samples no plane column."""
    out_w = row.shape[0]
    first, end = table[0], table[hi - lo]
    if mirrored:
        _fill(row, 0, out_w - end, outside)
        _fill(row, out_w - first, out_w, outside)
    else:
        _fill(row, 0, first, outside)
        _fill(row, end, out_w, outside)
    start = int64(0)
    for t in range(k):
        stop = ends[t]
        if stop > lo:
            a = table[max(start, lo) - lo]
            b = table[min(stop, hi) - lo]
            if mirrored:
                _fill(row, out_w - b, out_w - a, values[t])
            else:
                _fill(row, a, b, values[t])
            if stop >= hi:
                break
        start = stop


@cached_njit
def _paint_plane(data, at, value_bytes, top, left, rows, cols, transform, out, outside, ends, values, table):
    """Samples the plane whose block table starts at ``data[at]``, placed at
    ``(top, left)`` of the stored mask, onto every pixel of the 2-D ``out``
    through ``transform``; ``outside`` where an output pixel samples no plane
    pixel.  Returns a status."""
    if geometry.is_axis_aligned(transform):
        return _paint_axes(data, at, value_bytes, top, left, rows, cols, transform[geometry.SCALE_Y],
                           transform[geometry.SCALE_X], transform[geometry.OFFSET_Y], transform[geometry.OFFSET_X],
                           out, outside, ends, values, table)
    plane = np.empty((rows, cols), out.dtype)
    status = _paint_axes(data, at, value_bytes, top, left, rows, cols, 1.0, 1.0, float(-top), float(-left), plane,
                         outside, ends, values, table)
    if status == _OK:
        _warp_nearest(plane, top, left, geometry.inverse(transform, np.empty(geometry.MATRIX)), out, outside)
    return status


@cached_njit
def _warp_nearest(plane, top, left, inverse, out, outside):
    """Each pixel of ``out`` takes the pixel of ``plane`` (placed at ``(top,
    left)``) containing its centre's image under the matrix ``inverse`` (9
    values, row-major), or ``outside``: the rule of the module docstring."""
    rows, cols = plane.shape
    for i in range(out.shape[0]):
        y_out = float(i) + 0.5
        for j in range(out.shape[1]):
            x_out = float(j) + 0.5
            w = inverse[6] * x_out + inverse[7] * y_out + inverse[8]
            out[i, j] = outside
            if not w > 0.0:  # behind the horizon: no stored point
                continue
            x = (inverse[0] * x_out + inverse[1] * y_out + inverse[2]) / w
            y = (inverse[3] * x_out + inverse[4] * y_out + inverse[5]) / w
            if x >= left and x < left + cols and y >= top and y < top + rows:
                out[i, j] = plane[int64(np.floor(y)) - top, int64(np.floor(x)) - left]


@cached_njit
def _paint_axes(data, at, value_bytes, top, left, rows, cols, scale_y, scale_x, offset_y, offset_x, out, outside,
                ends, values, table):
    """:func:`_paint_plane` through an axis-aligned map (``scale_y``,
    ``scale_x``, ``offset_y``, ``offset_x``): reads only the blocks of the
    rows the output samples."""
    out_h, out_w = int64(out.shape[0]), int64(out.shape[1])
    lo, hi = _column_table(scale_x, offset_x, out_w, left, cols, table)
    visible = lo < hi
    blocks = (rows + (1 << BLOCK_SHIFT) - 1) >> BLOCK_SHIFT
    rows_start = at + 4 * blocks
    if rows_start > len(data):
        return _ETRUNCATED
    block, row_at, pos, k = int64(-1), int64(-1), int64(0), int64(0)
    version, painted, previous = int64(0), int64(-1), int64(-1)
    for step in range(out_h):
        i = step if scale_y > 0.0 else out_h - 1 - step  # so that source rows only grow
        source = ((float(i) + 0.5) - offset_y) / scale_y
        if not (visible and source >= top and source < top + rows):
            _fill(out[i], 0, out_w, outside)
            continue
        r = int64(np.floor(source)) - top
        if r >> BLOCK_SHIFT != block:
            block = r >> BLOCK_SHIFT
            pos = _u32(data, at + 4 * block)
            if pos < rows_start or pos >= len(data):
                return _ECORRUPT
            row_at, k = (block << BLOCK_SHIFT) - 1, int64(0)
        while row_at < r:
            status, pos, k, changed = _next_row(data, pos, value_bytes, cols, k, ends, values)
            if status != _OK:
                return status
            version += changed
            row_at += 1
        if version == painted:  # the same runs as the last row written: copy it
            _copy(out[i], out[previous])
        else:
            _paint_row(out[i], k, ends, values, table, lo, hi, scale_x < 0.0, outside)
        painted, previous = version, i
    return _OK


@cached_njit
def _decode_mask(data, height, width, transform, out, fill):
    if len(data) < SEMANTIC_HEADER:
        return _ETRUNCATED
    if data[0] != 0x53 or data[1] != 0x4D or data[2] != VERSION or data[4] != BLOCK_SHIFT:
        return _ECORRUPT
    value_bytes = int64(data[3])
    if value_bytes < 1 or value_bytes > 2 or _u32(data, 8) != height or _u32(data, 12) != width:
        return _ECORRUPT
    if value_bytes > out.itemsize:  # 16-bit class ids into an 8-bit output
        return _EINVAL
    ends = np.empty(width, np.int64)
    values = np.empty(width, np.int64)
    table = np.empty(width + 1, np.int64)
    return _paint_plane(data, SEMANTIC_HEADER, value_bytes, 0, 0, height, width, transform, out, fill, ends,
                        values, table)


@cached_njit(entry=True)  # public: Python calls it
def decode_mask(data, height, width, transform, out, fill):
    """Decodes a semantic mask (:func:`encode_mask`) onto the output grid of
    ``transform``, nearest neighbour (see the module docstring).

    Args:
        data: uint8 1-D array, the stored bytes of one sample.
        height, width: the stored mask's size (the field's record), in pixels.
        transform: float64 transform of :mod:`slipstream.fields.geometry`.
        out: (out_h, out_w) array of the field's dtype (uint8 or uint16).
        fill: the value of output pixels outside the mask, in ``out``'s
            range.

    Returns:
        0 on success.  Otherwise ``out`` holds ``fill`` (0 if ``fill`` is
        out of range) and the status is ``Status.EINVAL`` for bad arguments
        (transform, output shape, ``fill``, 16-bit ids into a uint8 output),
        ``Status.ECORRUPT`` for bytes that are not a mask of this size, or
        ``Status.ETRUNCATED`` for bytes that end early.  Through an
        axis-aligned transform only the rows the output samples are read, so
        corruption elsewhere goes unnoticed.
    """
    limit = (int64(1) << (8 * out.itemsize)) - 1
    status = _check_transform(transform, out.shape[0], out.shape[1])
    if status == _OK and not (0 <= fill <= limit):
        status = _EINVAL
    if status == _OK and not (1 <= height <= MAX_SIDE and 1 <= width <= MAX_SIDE):
        status = _EINVAL
    if status == _OK:
        status = _decode_mask(data, int64(height), int64(width), transform, out, int64(fill))
    if status != _OK:
        value = fill if 0 <= fill <= limit else 0
        for i in range(out.shape[0]):
            _fill(out[i], 0, out.shape[1], value)
    return status


@cached_njit
def _decode_instances(data, height, width, count, select, n_select, transform, out):
    if len(data) < INSTANCES_HEADER:
        return _ETRUNCATED
    if data[0] != 0x53 or data[1] != 0x49 or data[2] != VERSION or data[3] != 0 or data[4] != BLOCK_SHIFT:
        return _ECORRUPT
    if _u32(data, 8) != height or _u32(data, 12) != width or _u32(data, 16) != count:
        return _ECORRUPT
    if INSTANCES_HEADER + INSTANCE_ENTRY * count > len(data):
        return _ETRUNCATED
    ends = np.empty(width, np.int64)
    values = np.empty(width, np.int64)
    table = np.empty(width + 1, np.int64)
    for n in range(n_select):
        index = int64(select[n])
        if index < 0 or index >= count:
            return _EINVAL
        entry = INSTANCES_HEADER + INSTANCE_ENTRY * index
        at = _u32(data, entry)
        top, left, rows, cols = (_u16(data, entry + 4), _u16(data, entry + 6), _u16(data, entry + 8),
                                 _u16(data, entry + 10))
        if rows == 0 and cols == 0:  # an empty mask
            for i in range(out.shape[1]):
                _fill(out[n, i], 0, out.shape[2], 0)
            continue
        if rows == 0 or cols == 0 or top + rows > height or left + cols > width:
            return _ECORRUPT
        status = _paint_plane(data, at, 0, top, left, rows, cols, transform, out[n], 0, ends, values, table)
        if status != _OK:
            return status
    return _OK


@cached_njit(entry=True)  # public: Python calls it
def decode_instances(data, height, width, count, select, n_select, transform, out):
    """Decodes chosen instance masks (:func:`encode_instances`) onto the
    output grid of ``transform``, nearest neighbour (see the module
    docstring).

    Args:
        data: uint8 1-D array, the stored bytes of one sample.
        height, width: the stored masks' size (the field's record), in pixels.
        count: how many instances the sample stores (the record's ``length``).
        select: int64 array: ``out[k]`` receives instance ``select[k]``, for
            ``k < n_select``; an instance may be chosen more than once.
        n_select: how many of ``select`` to decode, at most ``out.shape[0]``.
        transform: float64 transform of :mod:`slipstream.fields.geometry`.
        out: (max_n, out_h, out_w) uint8 array: receives 0 and 1, and zeros
            in ``out[n_select:]``.

    Returns:
        0 on success.  Otherwise ``out`` is all zeros and the status is
        ``Status.EINVAL`` for bad arguments (transform, output shape,
        ``n_select``, a ``select`` index outside 0..count-1),
        ``Status.ECORRUPT`` for bytes that are not ``count`` masks of this
        size, or ``Status.ETRUNCATED`` for bytes that end early.  Through an
        axis-aligned transform only the rows the output samples are read.
    """
    status = _check_transform(transform, out.shape[1], out.shape[2])
    if status == _OK and not (0 <= n_select <= out.shape[0] and n_select <= select.shape[0] and count >= 0):
        status = _EINVAL
    if status == _OK and not (1 <= height <= MAX_SIDE and 1 <= width <= MAX_SIDE):
        status = _EINVAL
    if status == _OK:
        status = _decode_instances(data, int64(height), int64(width), int64(count), select, int64(n_select),
                                   transform, out)
    first_zero = n_select if status == _OK else 0
    for n in range(first_zero, out.shape[0]):
        for i in range(out.shape[1]):
            _fill(out[n, i], 0, out.shape[2], 0)
    return status


def _decode_error(status: int, what: str) -> DecodeError:
    try:
        name = Status(status).name
    except ValueError:
        name = str(status)
    problem = f"the stored {what} cannot be decoded ({name}: corrupt or truncated bytes)"
    return DecodeError(problem, status=status, detail=problem)


def _stored_size_problem(records: np.ndarray, least: np.ndarray, most: np.ndarray) -> tuple[int, str] | None:
    """The first record whose height or width is outside 1..MAX_SIDE, or
    whose size is outside [least, most]."""
    height, width = records["height"].astype(np.int64), records["width"].astype(np.int64)
    side = (height < 1) | (width < 1) | (height > MAX_SIDE) | (width > MAX_SIDE)
    size = records["size"].astype(np.float64)  # least and most can pass 2**63 on absurd records
    bad = np.flatnonzero(side | (size < least) | (size > most))
    if not bad.size:
        return None
    i = int(bad[0])
    what = (f"has a size outside 1 to {MAX_SIDE} pixels" if side[i]
            else "holds a number of bytes no mask of its size codes to")
    return i, f"{what} ({int(height[i])}x{int(width[i])}, {int(records['size'][i])} bytes)"


def _block_table_bytes(rows: np.ndarray) -> np.ndarray:
    return 4.0 * np.ceil(rows / (1 << BLOCK_SHIFT))


# ==================================================================== fields


@dataclasses.dataclass(frozen=True)
class SegmentationMaskField(Field, type_id=8):
    """A semantic segmentation mask per sample: one class id per pixel,
    stored losslessly (see the module docstring), of any size.  The record
    holds its height and width, so a loader plans crops without reading any
    page.

    Args:
        dtype: ``np.uint8`` (class ids 0..255) or ``np.uint16`` (0..65535):
            what :meth:`read` returns and the decoders write.

    Accepted values: an (H, W) integer or bool array (any width of integer:
    values are checked against ``dtype``'s range), 1 to 65535 pixels a side.
    """

    dtype: Any = np.uint8

    def __post_init__(self) -> None:
        dtype = np.dtype(self.dtype)
        if dtype.kind != "u" or dtype.itemsize not in (1, 2):
            raise ValueError(f"SegmentationMaskField dtype must be uint8 or uint16, got {dtype}")
        object.__setattr__(self, "dtype", dtype.newbyteorder("<"))

    def arguments(self) -> dict[str, Any]:
        return {"dtype": self.dtype.str}

    def record_dtype(self) -> np.dtype:
        return np.dtype([("offset", "<u8"), ("size", "<u8"), ("height", "<u4"), ("width", "<u4")])

    def encode(self, value: Any) -> Encoded:
        array = _integer_array(value, "SegmentationMaskField value")
        if array.ndim != 2:
            raise ValueError(f"SegmentationMaskField takes a (height, width) array, got shape {array.shape}")
        limit = np.iinfo(self.dtype).max
        if array.size and array.dtype != np.bool_:
            low, high = int(array.min()), int(array.max())
            if low < 0 or high > limit:
                bad = low if low < 0 else high
                at = tuple(int(v) for v in np.argwhere(array == bad)[0])
                raise ValueError(f"SegmentationMaskField({self.dtype.name}) holds class ids 0..{limit}, got {bad} "
                                 f"at {at}")
        return Encoded({"height": array.shape[0], "width": array.shape[1]}, encode_mask(array))

    def check_records(self, records: np.ndarray) -> tuple[int, str] | None:
        """Sizes of 1 to 65535 pixels a side, and at least the bytes of a
        header, a block table and a byte per row; at most those of runs of
        one pixel, three bytes of length and two of value each."""
        height, width = records["height"].astype(np.float64), records["width"].astype(np.float64)
        least = SEMANTIC_HEADER + _block_table_bytes(height) + height
        most = SEMANTIC_HEADER + _block_table_bytes(height) + height * (3 + 5 * width)
        return _stored_size_problem(records, least, most)

    def read(self, record: np.void, data: memoryview | None) -> np.ndarray:
        """The (height, width) mask, of the field's dtype.

        Raises:
            DecodeError: the stored bytes are corrupt or truncated.
        """
        height, width = int(record["height"]), int(record["width"])
        out = np.empty((height, width), self.dtype)
        status = decode_mask(np.frombuffer(data, np.uint8), height, width, crop_transform(0, 0, height, width,
                             height, width), out, 0)
        if status != 0:
            raise _decode_error(status, "mask")
        return out


@dataclasses.dataclass(frozen=True)
class InstanceMasksField(Field, type_id=9):
    """Any number of binary instance masks per sample (n >= 0), of one
    size per sample, stored losslessly, each on its own (they may overlap)
    and only within its bounding box (see the module docstring).  The record
    holds the height, the width and the number of masks (``length``).

    Accepted values: an (n, H, W) integer or bool array, nonzero inside an
    instance, 1 to 65535 pixels a side (``np.zeros((0, H, W))`` for none).
    """

    def record_dtype(self) -> np.dtype:
        return np.dtype([("offset", "<u8"), ("size", "<u8"), ("height", "<u4"), ("width", "<u4"),
                         ("length", "<u8")])

    def encode(self, value: Any) -> Encoded:
        array = _integer_array(value, "InstanceMasksField value")
        if array.ndim != 3:
            raise ValueError(f"InstanceMasksField takes an (instances, height, width) array (np.zeros((0, H, W)) "
                             f"for none), got shape {array.shape}")
        count, height, width = array.shape
        return Encoded({"height": height, "width": width, "length": count}, encode_instances(array))

    def check_records(self, records: np.ndarray) -> tuple[int, str] | None:
        """Sizes of 1 to 65535 pixels a side, and at least the bytes of a
        header and of ``length`` instance entries; at most those of that many
        masks coded at their largest."""
        height, width = records["height"].astype(np.float64), records["width"].astype(np.float64)
        count = records["length"].astype(np.float64)
        least = INSTANCES_HEADER + INSTANCE_ENTRY * count
        most = least + count * (_block_table_bytes(height) + height * (3 + 3 * width))
        return _stored_size_problem(records, least, most)

    def read(self, record: np.void, data: memoryview | None) -> np.ndarray:
        """The (length, height, width) uint8 masks, 1 inside each instance.

        Raises:
            DecodeError: the stored bytes are corrupt or truncated.
        """
        height, width, count = int(record["height"]), int(record["width"]), int(record["length"])
        out = np.empty((count, height, width), np.uint8)
        status = decode_instances(np.frombuffer(data, np.uint8), height, width, count, np.arange(count, dtype=np.int64),
                                  count, crop_transform(0, 0, height, width, height, width), out)
        if status != 0:
            raise _decode_error(status, "instance masks")
        return out
