"""Segmentation mask fields: lossless round trips through real files, the
compiled decoders against the NumPy reference on random geometry, corrupt
bytes, and a clear error for every bad value."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import slipstream as ss
from slipstream.fields import masks as M
from slipstream.native import Status
from slipstream.ops import RandomResizedCrop, SegmentationMask

STATUSES = {int(Status.EINVAL), int(Status.ECORRUPT), int(Status.ETRUNCATED)}

# ---------------------------------------------------------------- helpers


def blobs(rng: np.random.Generator, height: int, width: int, classes: int = 12, dtype=np.uint8) -> np.ndarray:
    """Overlapping ellipses of random classes over a background: runs that
    grow, shrink and shift from row to row, as in real masks."""
    mask = np.zeros((height, width), dtype)
    yy, xx = np.mgrid[0:height, 0:width]
    for _ in range(rng.integers(3, 15)):
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        ry, rx = rng.uniform(1, height / 2 + 1), rng.uniform(1, width / 2 + 1)
        mask[((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 < 1] = rng.integers(0, classes)
    return mask


def instances(rng: np.random.Generator, count: int, height: int, width: int) -> np.ndarray:
    """``count`` ellipse instances (overlapping at random), as uint8 0/1."""
    yy, xx = np.mgrid[0:height, 0:width]
    out = np.zeros((count, height, width), np.uint8)
    for n in range(count):
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        ry, rx = rng.uniform(0.5, height / 3 + 1), rng.uniform(0.5, width / 3 + 1)
        out[n] = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 < 1
    return out


def write_read(tmp_path: Path, values: list, field: ss.Field) -> list:
    """``values`` written as field ``m`` of a dataset file, read back."""
    path = tmp_path / "masks.slip"
    ss.write(path, [{"m": v} for v in values], {"m": field}, workers=0, page_size=4096, verbose=False)
    with ss.Reader(path) as reader:
        assert reader.fields["m"] == field
        return [reader.read(i, "m") for i in range(len(values))]


def identity(height: int, width: int) -> np.ndarray:
    return M.crop_transform(0, 0, height, width, height, width)


def random_transform(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """Scales up and down, flips, and offsets that put the output partly or
    wholly outside the mask; a fifth of them with round numbers, whose
    sampling points fall exactly on pixel edges."""
    if rng.random() < 0.2:
        sy, sx = rng.choice([0.25, 0.5, 1, 2, 3, -1, -2, -0.5], 2)
        oy, ox = rng.integers(-4, 5, 2).astype(float)
        if sy < 0:
            oy += rng.integers(1, 3) * height * -sy
        if sx < 0:
            ox += rng.integers(1, 3) * width * -sx
    else:
        sy, sx = np.exp(rng.uniform(-2.5, 2.5, 2)) * rng.choice([-1, 1], 2)
        oy = rng.uniform(-1.2, 1.2) * height * abs(sy) + (height * -sy if sy < 0 else 0)
        ox = rng.uniform(-1.2, 1.2) * width * abs(sx) + (width * -sx if sx < 0 else 0)
    out_h, out_w = rng.integers(0, 70, 2)
    return axes(sy, sx, oy, ox, out_h, out_w)


def axes(sy: float, sx: float, oy: float, ox: float, out_h: float, out_w: float) -> np.ndarray:
    """The axis-aligned transform y' = sy y + oy, x' = sx x + ox onto out_h x out_w."""
    return np.array([sx, 0, ox, 0, sy, oy, 0, 0, 1, out_h, out_w], np.float64)


def blocks(data: bytes, height: int, at: int = M.SEMANTIC_HEADER) -> np.ndarray:
    """The block table of the plane at ``data[at:]``."""
    count = (height + (1 << M.BLOCK_SHIFT) - 1) >> M.BLOCK_SHIFT
    return np.frombuffer(data, "<u4", count, at).astype(np.int64)


# ---------------------------------------------------------------- round trips


def test_semantic_masks_of_every_shape_round_trip_through_a_file(tmp_path):
    rng = np.random.default_rng(0)
    values = [
        np.array([[7]], np.uint8),
        rng.integers(0, 3, (1, 77)).astype(np.uint8),
        rng.integers(0, 3, (91, 1)).astype(np.int64),
        np.full((64, 64), 5, np.uint8),  # one class: one literal row, then repeats
        rng.integers(0, 256, (33, 65)).astype(np.uint8),  # noise: a run per pixel
        blobs(rng, 200, 150),
        blobs(rng, 97, 301, classes=256).astype(np.int32),
        np.tril(np.full((70, 70), 255, np.uint8)),  # one boundary moving by one column a row
        np.zeros((40, 40), bool) | (np.arange(40) % 2 == 0)[None, :],
    ]
    read = write_read(tmp_path, values, ss.SegmentationMaskField())
    for value, got in zip(values, read):
        assert got.dtype == np.uint8 and got.shape == value.shape
        np.testing.assert_array_equal(got, value)


def test_uint16_masks_round_trip_and_keep_their_dtype(tmp_path):
    rng = np.random.default_rng(1)
    values = [blobs(rng, 50, 60, classes=65536, dtype=np.uint16), np.array([[0, 65535, 256]], np.uint16),
              blobs(rng, 30, 20, classes=200, dtype=np.uint16)]  # small ids in a 16-bit field: one byte a run
    field = ss.SegmentationMaskField(np.uint16)
    read = write_read(tmp_path, values, field)
    for value, got in zip(values, read):
        assert got.dtype == np.uint16
        np.testing.assert_array_equal(got, value)
    assert field.arguments() == {"dtype": "<u2"} and field.type_id == 8
    assert M.encode_mask(values[2])[3] == 1 and M.encode_mask(values[1])[3] == 2  # value bytes in the header


def test_records_hold_the_size_and_the_instance_count(tmp_path):
    path = tmp_path / "d.slip"
    rng = np.random.default_rng(2)
    items = [{"sem": blobs(rng, 30 + i, 40 - i), "ins": instances(rng, i, 30 + i, 40 - i)} for i in range(4)]
    ss.write(path, items, {"sem": ss.SegmentationMaskField(), "ins": ss.InstanceMasksField()}, workers=0,
             verbose=False)
    with ss.Reader(path) as reader:
        assert reader.fields["ins"].type_id == 9
        np.testing.assert_array_equal(reader.metadata["sem"]["height"], [30, 31, 32, 33])
        np.testing.assert_array_equal(reader.metadata["sem"]["width"], [40, 39, 38, 37])
        np.testing.assert_array_equal(reader.metadata["ins"]["length"], [0, 1, 2, 3])
        np.testing.assert_array_equal(reader.metadata["ins"]["height"], reader.metadata["sem"]["height"])


def test_instance_masks_round_trip_overlapping_empty_and_none(tmp_path):
    rng = np.random.default_rng(3)
    overlapping = instances(rng, 6, 50, 70)
    overlapping[2] = overlapping[1]  # the same pixels twice, and a mask inside another
    overlapping[3] = 0
    overlapping[3, 10:20, 10:20] = 1
    overlapping[4, 5:30, 5:30] = 1
    overlapping[5] = 0  # an empty instance between others
    borders = np.zeros((3, 9, 11), np.uint8)
    borders[0] = 1  # the whole image
    borders[1, 0, :] = borders[1, :, 0] = borders[1, -1, :] = borders[1, :, -1] = 1  # a ring touching every edge
    borders[2, 8, 10] = 1  # the last pixel alone
    values = [np.zeros((0, 25, 35), np.uint8), overlapping, borders, np.ones((3, 1, 1), bool),
              instances(rng, 1, 1, 80).astype(np.int64) * 7, instances(rng, 4, 120, 1) != 0,
              instances(rng, 25, 200, 300)]
    read = write_read(tmp_path, values, ss.InstanceMasksField())
    for value, got in zip(values, read):
        assert got.dtype == np.uint8 and got.shape == value.shape
        np.testing.assert_array_equal(got, (value != 0).astype(np.uint8))


def test_masks_of_extreme_sizes_and_many_chunks_round_trip():
    rng = np.random.default_rng(4)
    for shape in [(3, 16384), (16384, 2), (1, M.MAX_SIDE), (1100, 1024)]:  # the last is coded in two chunks
        mask = rng.integers(0, 4, shape, dtype=np.uint8) if shape[0] < 8 else blobs(rng, *shape)
        data = np.frombuffer(M.encode_mask(mask), np.uint8)
        out = np.empty(shape, np.uint8)
        assert M.decode_mask(data, *shape, identity(*shape), out, 0) == 0
        np.testing.assert_array_equal(out, mask)
    stack = np.zeros((2, 20000, 3), np.uint8)
    stack[1, 17000:19000, 1] = 1
    data = np.frombuffer(M.encode_instances(stack), np.uint8)
    out = np.empty(stack.shape, np.uint8)
    assert M.decode_instances(data, 20000, 3, 2, np.arange(2), 2, identity(20000, 3), out) == 0
    np.testing.assert_array_equal(out, stack)


def test_row_coding_stays_compact():
    # A boundary moving a few columns a row costs 2 bytes a row (header, shift), a repeated row 1.
    diagonal = (np.arange(300)[None, :] < 3 * np.arange(300)[:, None] // 2).astype(np.uint8)
    table = 4 * 10
    assert len(M.encode_mask(diagonal)) <= M.SEMANTIC_HEADER + table + 2 * 300 + 10 * 3
    assert len(M.encode_mask(np.zeros((300, 300), np.uint8))) <= M.SEMANTIC_HEADER + table + 300 + 10 * 3
    # Thirty 10 x 10 instances in a 1024 x 768 image: each is coded within its box.
    stack = np.zeros((30, 768, 1024), np.uint8)
    for n in range(30):
        stack[n, 20 * n: 20 * n + 10, 30 * n: 30 * n + 10] = 1
    assert len(M.encode_instances(stack)) <= M.INSTANCES_HEADER + 30 * (M.INSTANCE_ENTRY + 4 + 2 + 3 + 9)


def test_shifts_at_the_limits_of_half_a_byte_round_trip():
    # Boundaries moving by -8 and +7 a row use shifted rows, by 8 or more literal ones.
    for step in (-8, -9, 7, 8, 0):
        edges = 100 + step * np.arange(12)
        mask = (np.arange(220)[None, :] >= edges[:, None]).astype(np.uint8) * 3
        data = np.frombuffer(M.encode_mask(mask), np.uint8)
        out = np.empty_like(mask)
        assert M.decode_mask(data, 12, 220, identity(12, 220), out, 0) == 0
        np.testing.assert_array_equal(out, mask)


def semantic_bytes(rows: bytes, height: int = 2, width: int = 4, value_bytes: int = 1, table=None) -> np.ndarray:
    """A semantic mask written by hand: header, block table, rows."""
    table = [M.SEMANTIC_HEADER + 4] if table is None else table
    header = b"SM" + bytes([1, value_bytes, M.BLOCK_SHIFT, 0, 0, 0]) + np.array([height, width], "<u4").tobytes()
    return np.frombuffer(header + np.array(table, "<u4").tobytes() + rows, np.uint8)


def test_the_decoders_read_the_documented_format():
    out = np.empty((2, 4), np.uint8)
    # literal (2 runs: 2 x class 1, 2 x class 2), then the inner boundary moved right by one
    assert M.decode_mask(semantic_bytes(b"\x04\x02\x01\x02\x02" + b"\x01\x01"), 2, 4, identity(2, 4), out, 0) == 0
    assert out.tolist() == [[1, 1, 2, 2], [1, 1, 1, 2]]
    wide = np.empty((1, 3), np.uint16)  # 16-bit values, little-endian
    assert M.decode_mask(semantic_bytes(b"\x02\x03\x01\x02", 1, 3, value_bytes=2), 1, 3, identity(1, 3), wide,
                         0) == 0
    assert wide.tolist() == [[513, 513, 513]]
    # one instance of 2 x 3 pixels at (1, 1): a literal row starting with 1 (m = 2k - 1 + 1 = 4), then a repeat
    masks = np.empty((1, 3, 5), np.uint8)
    assert M.decode_instances(instance_bytes((1, 1, 2, 3)), 3, 5, 1, np.zeros(1, np.int64), 1, identity(3, 5),
                              masks) == 0
    assert masks[0].tolist() == [[0, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 1, 0, 0, 0]]


def instance_bytes(box: tuple[int, int, int, int], rows: bytes = b"\x08\x01\x02" + b"\x00") -> np.ndarray:
    """One instance in a 3 x 5 image written by hand: ``box`` is (top, left,
    rows, cols) and ``rows`` its plane's rows."""
    plane = M.INSTANCES_HEADER + M.INSTANCE_ENTRY
    entry = np.array([plane], "<u4").tobytes() + np.array(box, "<u2").tobytes()
    return np.frombuffer(b"SI" + bytes([1, 0, M.BLOCK_SHIFT, 0, 0, 0]) + np.array([3, 5, 1], "<u4").tobytes() + entry
                         + np.array([plane + 4], "<u4").tobytes() + rows, np.uint8)


@pytest.mark.parametrize("box, problem", [
    ((2, 1, 2, 3), "a box below the image"),
    ((1, 3, 2, 3), "a box right of the image"),
    ((1, 1, 0, 3), "a box of no rows but some columns"),
])
def test_an_instance_box_outside_the_image_is_refused(box, problem):
    out = np.ones((1, 3, 5), np.uint8)
    status = M.decode_instances(instance_bytes(box), 3, 5, 1, np.zeros(1, np.int64), 1, identity(3, 5), out)
    assert status == Status.ECORRUPT and not out.any(), problem


@pytest.mark.parametrize("rows, table, problem", [
    (b"\x04\x02\x01\x02\x02" + b"\x01\x0e", None, "a boundary moved onto the row's start (-2)"),
    (b"\x04\x02\x01\x02\x02" + b"\x01\x02", None, "a boundary moved onto the row's end (+2)"),
    (b"\x06\x01\x01\x01\x02\x02\x03" + b"\x01\x01", None, "two boundaries moved onto each other"),
    (b"\x00" + b"\x00", None, "a block starting with a repeat"),
    (b"\x01\x00" + b"\x00", None, "a block starting with shifts"),
    (b"\x03\x04\x01" + b"\x00", None, "an odd header over 1"),
    (b"\x04\x02\x01\x03\x02" + b"\x00", None, "runs longer than the row"),
    (b"\x04\x02\x01\x01\x02" + b"\x00", None, "runs shorter than the row"),
    (b"\x04\x00\x01\x04\x02" + b"\x00", None, "a run of no pixels"),
    (b"\x80\x80\x80\x01", None, "a varint of four bytes"),
    (b"\x0a" + b"\x01\x01" * 5 + b"\x00", None, "more runs than pixels"),
    (b"\x02\x04\x01" + b"\x00", [8], "a block inside the header"),
])
def test_each_kind_of_corrupt_row_is_refused(rows, table, problem):
    out = np.full((2, 4), 8, np.uint8)
    assert M.decode_mask(semantic_bytes(rows, table=table), 2, 4, identity(2, 4), out, 6) == Status.ECORRUPT, problem
    assert (out == 6).all()


@pytest.mark.parametrize("at, byte, problem", [
    (0, ord("X"), "magic"), (2, 2, "version"), (3, 0, "no value bytes"), (3, 3, "three value bytes"),
    (4, 4, "another block shift"), (8, 3, "height"),
])
def test_an_unknown_header_is_refused(at, byte, problem):
    data = semantic_bytes(b"\x02\x04\x01\x00").copy()
    out = np.empty((2, 4), np.uint8)
    assert M.decode_mask(data, 2, 4, identity(2, 4), out, 0) == 0
    data[at] = byte
    assert M.decode_mask(data, 2, 4, identity(2, 4), out, 0) == Status.ECORRUPT, problem


# ---------------------------------------------------------------- geometry


def test_the_reference_follows_the_documented_grid():
    mask = np.arange(6, dtype=np.uint8).reshape(2, 3)
    np.testing.assert_array_equal(M.resample_nearest(mask, identity(2, 3), 9), mask)
    # Twice the size, shifted down by one output pixel and right by three: the first row and columns are fill.
    out = M.resample_nearest(mask, axes(2, 2, 1, 3, 5, 8), 9)
    expected = np.full((5, 8), 9, np.uint8)
    expected[1:5, 3:8] = np.repeat(np.repeat(mask, 2, 0), 2, 1)[:, :5]
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(M.resample_nearest(mask, M.crop_transform(0, 0, 2, 3, 2, 3, flip=True), 9),
                                  mask[:, ::-1])


def test_crop_transform_samples_the_crop_box():
    rng = np.random.default_rng(5)
    mask = blobs(rng, 60, 80)
    data = np.frombuffer(M.encode_mask(mask), np.uint8)
    crop = mask[10:40, 20:60]
    for flip in (False, True):
        out = np.empty((60, 80), np.uint8)
        assert M.decode_mask(data, 60, 80, M.crop_transform(10, 20, 30, 40, 60, 80, flip), out, 0) == 0
        expected = np.repeat(np.repeat(crop, 2, 0), 2, 1)
        np.testing.assert_array_equal(out, expected[:, ::-1] if flip else expected)
    with pytest.raises(ValueError, match="positive size"):
        M.crop_transform(0, 0, 0, 10, 5, 5)


def test_decode_mask_equals_the_reference_on_random_transforms():
    rng = np.random.default_rng(6)
    masks = [np.array([[3]], np.uint8), rng.integers(0, 3, (1, 50)).astype(np.uint8),
             rng.integers(0, 3, (45, 1)).astype(np.uint8), blobs(rng, 100, 77), blobs(rng, 70, 130),
             rng.integers(0, 4, (66, 40)).astype(np.uint8), blobs(rng, 90, 60, classes=60000, dtype=np.uint16)]
    for mask in masks:
        data = np.frombuffer(M.encode_mask(mask), np.uint8)
        for _ in range(120):
            transform = random_transform(rng, *mask.shape)
            out = np.full(transform[9:].astype(int), 77, mask.dtype)
            assert M.decode_mask(data, *mask.shape, transform, out, 250) == 0
            np.testing.assert_array_equal(out, M.resample_nearest(mask, transform, 250), err_msg=str(transform))


def test_decode_instances_equals_the_reference_on_random_transforms_and_selections():
    rng = np.random.default_rng(7)
    for shape in [(1, 1), (40, 1), (1, 40), (75, 90), (130, 60)]:
        stack = instances(rng, 6, *shape)
        stack[0] = 0
        count = len(stack)
        data = np.frombuffer(M.encode_instances(stack), np.uint8)
        for _ in range(60):
            transform = random_transform(rng, *shape)
            select = rng.integers(0, count, rng.integers(0, 9))  # repeats and any order
            out = np.full((9, *transform[9:].astype(int)), 5, np.uint8)
            assert M.decode_instances(data, *shape, count, select, len(select), transform, out) == 0
            for k, index in enumerate(select):
                np.testing.assert_array_equal(out[k], M.resample_nearest(stack[index], transform, 0))
            assert not out[len(select):].any()


def test_a_crop_reads_only_the_blocks_of_its_rows():
    rng = np.random.default_rng(8)
    mask = blobs(rng, 128, 50)
    data = bytearray(M.encode_mask(mask))
    starts = blocks(bytes(data), 128)
    data[starts[0]:starts[1]] = b"\xff" * (starts[1] - starts[0])  # block 0 (rows 0-31) is now garbage
    data = np.frombuffer(bytes(data), np.uint8)
    crop = M.crop_transform(70, 5, 40, 30, 20, 15)  # rows 70-109: blocks 2 and 3
    out = np.empty((20, 15), np.uint8)
    assert M.decode_mask(data, 128, 50, crop, out, 0) == 0
    np.testing.assert_array_equal(out, M.resample_nearest(mask, crop, 0))
    whole = np.empty((128, 50), np.uint8)
    assert M.decode_mask(data, 128, 50, identity(128, 50), whole, 3) == Status.ECORRUPT
    assert (whole == 3).all()


# ---------------------------------------------------------------- corrupt bytes and bad arguments


def test_truncated_and_altered_bytes_give_a_status_and_a_filled_output():
    rng = np.random.default_rng(9)
    mask = blobs(rng, 40, 33)
    coded = M.encode_mask(mask)
    for end in range(len(coded)):  # every row is read at the identity, so every cut is noticed
        out = np.empty((40, 33), np.uint8)
        status = M.decode_mask(np.frombuffer(coded[:end], np.uint8), 40, 33, identity(40, 33), out, 9)
        assert status in STATUSES and (out == 9).all(), end
    stack = instances(rng, 3, 40, 33)
    coded = M.encode_instances(stack)
    for end in range(len(coded)):
        out = np.ones((4, 40, 33), np.uint8)
        status = M.decode_instances(np.frombuffer(coded[:end], np.uint8), 40, 33, 3, np.arange(3), 3,
                                    identity(40, 33), out)
        assert status in STATUSES and not out.any(), end
    for trial in range(300):
        altered = bytearray(coded)
        for at in rng.integers(0, len(coded), rng.integers(1, 4)):
            altered[at] = rng.integers(0, 256)
        transform = random_transform(rng, 40, 33)
        out = np.ones((3, *transform[9:].astype(int)), np.uint8)
        status = M.decode_instances(np.frombuffer(bytes(altered), np.uint8), 40, 33, 3, np.arange(3), 3, transform,
                                    out)
        assert status == 0 or (status in STATUSES and not out.any())
        assert (out <= 1).all()


def test_a_record_that_disagrees_with_the_bytes_is_corrupt():
    mask = np.ones((10, 12), np.uint8)
    data = np.frombuffer(M.encode_mask(mask), np.uint8)
    out = np.empty((10, 12), np.uint8)
    assert M.decode_mask(data, 10, 13, identity(10, 12), out, 0) == Status.ECORRUPT
    stack = np.frombuffer(M.encode_instances(mask[None]), np.uint8)
    assert M.decode_instances(stack, 10, 12, 2, np.arange(1), 1, identity(10, 12), out[None]) == Status.ECORRUPT
    assert M.decode_instances(data, 10, 12, 1, np.arange(1), 1, identity(10, 12), out[None]) == Status.ECORRUPT


@pytest.mark.parametrize("transform, shape, fill, problem", [
    ([1, 0, 0, 0, 1, 0, 0, 0, 1, 4], (4, 4), 0, "ten values"),
    ([1, 0, 0, 0, 0, 0, 0, 0, 1, 4, 4], (4, 4), 0, "zero scale"),
    ([1, 0, 0, 2, 0, 0, 0, 0, 1, 4, 4], (4, 4), 0, "singular matrix"),
    ([np.nan, 0, 0, 0, 1, 0, 0, 0, 1, 4, 4], (4, 4), 0, "NaN scale"),
    ([1, 0, 0, 0, 1, np.inf, 0, 0, 1, 4, 4], (4, 4), 0, "infinite offset"),
    ([1, 0, 0, 0, 1, 0, 0, 0, 1, 4, 5], (4, 4), 0, "output shape disagrees"),
    ([1, 0, 0, 0, 1, 0, 0, 0, 1, 4, 4], (4, 4), 256, "fill over uint8"),
    ([1, 0, 0, 0, 1, 0, 0, 0, 1, 4, 4], (4, 4), -1, "negative fill"),
])
def test_bad_decode_arguments_give_einval(transform, shape, fill, problem):
    data = np.frombuffer(M.encode_mask(np.ones((4, 4), np.uint8)), np.uint8)
    out = np.full(shape, 5, np.uint8)
    assert M.decode_mask(data, 4, 4, np.array(transform, np.float64), out, fill) == Status.EINVAL, problem
    assert (out == (fill if 0 <= fill <= 255 else 0)).all()


def test_bad_instance_selections_give_einval_and_zeros():
    data = np.frombuffer(M.encode_instances(np.ones((2, 4, 4), np.uint8)), np.uint8)
    for select, n_select, max_n in [([0, 2], 2, 2), ([-1], 1, 2), ([0, 1, 0], 3, 2), ([0], 2, 2)]:
        out = np.ones((max_n, 4, 4), np.uint8)
        assert M.decode_instances(data, 4, 4, 2, np.array(select, np.int64), n_select, identity(4, 4), out) \
            == Status.EINVAL
        assert not out.any()


def test_sixteen_bit_ids_refuse_an_eight_bit_output():
    data = np.frombuffer(M.encode_mask(np.array([[300, 1]])), np.uint8)
    out = np.empty((1, 2), np.uint8)
    assert M.decode_mask(data, 1, 2, identity(1, 2), out, 0) == Status.EINVAL
    wide = np.empty((1, 2), np.uint16)
    assert M.decode_mask(data, 1, 2, identity(1, 2), wide, 0) == 0 and wide.tolist() == [[300, 1]]


def test_no_read_outside_the_data_even_for_corrupt_bytes(tmp_path):
    """The fuzzing of the test above, compiled with Numba's bounds checks
    (an out-of-bounds index raises IndexError) in a fresh process and cache."""
    script = textwrap.dedent("""
        import numpy as np
        from numba import njit
        from slipstream.fields import masks as M

        @njit(boundscheck=None)
        def peek(a, i):
            return a[i]
        try:
            peek(np.zeros(2), 5)
            raise SystemExit("bounds checks are off")
        except IndexError:
            pass

        rng = np.random.default_rng(10)
        yy, xx = np.mgrid[0:70, 0:45]
        mask = ((xx * 3 + yy * 2) // 17 % 5 + (((yy - 30) ** 2 + (xx - 20) ** 2) < 300) * 7).astype(np.uint8)
        stack = np.stack([mask == 7, mask == 2, np.zeros_like(mask)])
        cases = [(M.encode_mask(mask), False), (M.encode_instances(stack), True)]
        failures = 0
        for coded, many in cases:
            # every cut, each read first by another instance, then random bytes changed
            trials = [(coded[:end], end % 3) for end in range(len(coded))]
            for trial in range(300):
                data = bytearray(coded)
                for at in rng.integers(0, len(data), rng.integers(1, 6)):
                    data[at] = rng.integers(0, 256)
                trials.append((bytes(data), trial % 3))
            for data, first in trials:
                data = np.frombuffer(data, np.uint8)
                sy, sx = np.exp(rng.uniform(-2, 2, 2)) * rng.choice([-1, 1], 2)
                out_h, out_w = rng.integers(1, 50, 2)
                oy, ox = rng.uniform(-40, 40) - min(sy, 0) * 70, rng.uniform(-40, 40) - min(sx, 0) * 45
                t = np.array([sx, 0, ox, 0, sy, oy, 0, 0, 1, out_h, out_w])
                if many:
                    out = np.empty((4, out_h, out_w), np.uint8)
                    select = np.array([first, *rng.integers(0, 3, 3)])
                    status = M.decode_instances(data, 70, 45, 3, select, 4, t, out)
                else:
                    out = np.empty((out_h, out_w), np.uint8)
                    status = M.decode_mask(data, 70, 45, t, out, 0)
                failures += status != 0
        print("failures", failures)
    """)
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path / "numba-cache"))
    # run outside the checkout, so that the installed package (with its native library) is imported
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300,
                            check=False, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "failures" in result.stdout and int(result.stdout.split()[-1]) > 300  # the corruption was noticed


# ---------------------------------------------------------------- bad values and records


@pytest.mark.parametrize("value, error, match", [
    (np.zeros(5, np.uint8), ValueError, r"\(height, width\) array, got shape \(5,\)"),
    (np.zeros((2, 3, 4), np.uint8), ValueError, r"\(height, width\) array, got shape \(2, 3, 4\)"),
    (np.zeros((3, 3), np.float32), TypeError, "integer or bool array, got dtype float32"),
    (np.array([[0, 256]]), ValueError, r"0\.\.255, got 256 at \(0, 1\)"),
    (np.array([[0], [-3]]), ValueError, r"got -3 at \(1, 0\)"),
    (np.zeros((0, 5), np.uint8), ValueError, "1 to 65535 pixels high and wide, got 0x5"),
    (np.zeros((1, 65536), np.uint8), ValueError, "got 1x65536"),
    ("not a mask", TypeError, "integer or bool array"),
])
def test_bad_semantic_values_are_refused_clearly(value, error, match):
    with pytest.raises(error, match=match):
        ss.SegmentationMaskField().encode(value)


def test_bad_instance_values_and_field_dtypes_are_refused_clearly(tmp_path):
    field = ss.InstanceMasksField()
    with pytest.raises(ValueError, match=r"\(instances, height, width\) array .* got shape \(4, 4\)"):
        field.encode(np.zeros((4, 4), np.uint8))
    with pytest.raises(TypeError, match="got dtype float64"):
        field.encode(np.zeros((1, 4, 4)))
    with pytest.raises(ValueError, match="got 0x4"):
        field.encode(np.zeros((2, 0, 4), np.uint8))
    with pytest.raises(ValueError, match="uint8 or uint16, got int32"):
        ss.SegmentationMaskField(np.int32)
    with pytest.raises(ValueError, match=r"65535, got 70000"):
        ss.SegmentationMaskField(np.uint16).encode(np.array([[70000]]))
    with pytest.raises(ss.FieldValueError, match=r"sample 1 .* field 'm': .*0\.\.255, got 300"):  # the writer's
        ss.write(tmp_path / "x.slip", [{"m": np.ones((2, 2), np.uint8)}, {"m": np.array([[300]])}],
                 {"m": ss.SegmentationMaskField()}, workers=0, verbose=False)


def test_check_records_refuses_sizes_no_mask_codes_to():
    semantic, instance = ss.SegmentationMaskField(), ss.InstanceMasksField()
    good = np.frombuffer(M.encode_mask(np.ones((40, 10), np.uint8)), np.uint8)
    records = np.zeros(4, semantic.record_dtype())
    records["height"], records["width"] = 40, 10
    records["size"] = len(good), 16 + 8 + 39, 16 + 8 + 40 * 53 + 1, len(good)
    records["width"][3] = 0
    assert semantic.check_records(records[:1]) is None
    assert semantic.check_records(records[1:2])[1].startswith("holds a number of bytes no mask")
    assert semantic.check_records(records[1:3])[0] == 0 and semantic.check_records(records[2:3])[0] == 0
    assert "size outside 1 to 65535" in semantic.check_records(records[3:])[1]
    records = np.zeros(3, instance.record_dtype())
    records["height"], records["width"], records["length"] = 5, 5, (0, 2, 3)
    records["size"] = 20, 20 + 24 - 1, 20 + 36
    assert instance.check_records(records[[0, 2]]) is None
    assert instance.check_records(records)[0] == 1


def test_reading_corrupt_bytes_raises_a_decode_error_naming_the_sample(tmp_path):
    path = tmp_path / "d.slip"
    ss.write(path, [{"m": np.full((50, 40), 3, np.uint8)}], {"m": ss.SegmentationMaskField()}, workers=0,
             verbose=False, page_checksums=False)
    with ss.Reader(path) as reader:
        offset = int(reader.metadata["m"]["offset"][0])
    raw = bytearray(path.read_bytes())
    raw[offset + M.SEMANTIC_HEADER + 8] = 0x05  # the first row's header (after 2 blocks' offsets): odd, not 1
    path.write_bytes(bytes(raw))
    with ss.Reader(path) as reader, pytest.raises(ss.DecodeError, match=r"sample 0, field 'm': the stored mask "
                                                                         r"cannot be decoded \(ECORRUPT"):
        reader.read(0, "m")


def test_a_loader_names_the_mask_field_that_cannot_be_decoded(tmp_path):
    """The loader's error for a corrupt mask names the field and the
    mask's own problem, not a JPEG one."""
    path = tmp_path / "d.slip"
    image = np.full((50, 40, 3), 90, np.uint8)
    ss.write(path, [{"image": image, "m": np.full((50, 40), 3, np.uint8)}],
             {"image": ss.RGBImageField(), "m": ss.SegmentationMaskField()}, workers=0, verbose=False,
             page_checksums=False)
    with ss.Reader(path) as reader:
        offset = int(reader.metadata["m"]["offset"][0])
    raw = bytearray(path.read_bytes())
    raw[offset + M.SEMANTIC_HEADER + 8] = 0x05
    path.write_bytes(bytes(raw))
    pipelines = {"image": [RandomResizedCrop(32)], "m": [SegmentationMask(follow="image")]}
    with ss.Loader(path, 1, pipelines, verbose=False) as loader:
        with pytest.raises(ss.DecodeError, match=r"d.slip: sample 0 cannot be decoded \(field 'm': the stored mask "
                                                 r"cannot be decoded") as err:
            list(loader)
    assert "JPEG" not in str(err.value)
