"""FFCV .beton files written by FFCV itself (tests/fixtures/ffcv, made by
make_fixtures.py there) read back by slipstream, without FFCV, with the values
FFCV's own reader returned."""

from __future__ import annotations

import gzip
import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

import slipstream as ss

FIXTURES = Path(__file__).parent / "fixtures" / "ffcv"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())
FILES = ["basic.beton", "images.beton", "images_smart.beton", "default_pagesize.beton"]


@pytest.fixture(scope="module")
def betons(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("betons")
    paths = {}
    for name in FILES:
        source = FIXTURES / name
        if not source.exists():  # stored gzipped: 16 MiB of mostly zero padding
            with gzip.open(FIXTURES / f"{name}.gz") as f, open(folder / name, "wb") as out:
                shutil.copyfileobj(f, out)
            source = folder / name
        paths[name] = source
    return paths


@pytest.fixture(scope="module")
def expected_arrays():
    with np.load(FIXTURES / "expected.npz") as data:
        return {key: data[key] for key in data.files}


def check_value(reader, name, field, index, value, expected, stored):
    if isinstance(field, ss.RGBImageField):
        if reader.metadata[name]["mode"][index] == 1:  # raw: exact
            np.testing.assert_array_equal(value, expected)
        else:  # JPEG: FFCV decodes with libjpeg-turbo's fast IDCT; so does FAST_IDCT, exactly
            fast = ss.native.jpeg_decode(stored, flags=ss.native.DecodeFlags.FAST_IDCT)
            np.testing.assert_array_equal(fast, expected)
            assert np.abs(value.astype(int) - expected).max() <= 8  # the accurate IDCT, close
    elif isinstance(field, ss.JSONField):  # FFCV's bytes end with a NUL that is not JSON
        assert expected[-1] == 0
        assert json.dumps(value) == json.dumps(json.loads(expected[:-1].tobytes().decode("ascii")))
    elif isinstance(field, ss.BytesField):
        assert value == expected.tobytes()
    elif isinstance(field, ss.NDArrayField):
        assert value.dtype == expected.dtype
        np.testing.assert_array_equal(value, expected)
    else:  # int and float: bit for bit (NaN, -0.0)
        assert np.asarray(value, expected.dtype).tobytes() == expected.tobytes()


@pytest.mark.parametrize("name", FILES)
def test_fixtures_read_back_as_ffcv_reads_them(betons, expected_arrays, name):
    info = EXPECTED[name]
    reader = ss.Reader(betons[name])
    assert type(reader) is ss.Reader and reader.format == "ffcv"
    assert len(reader) == info["header"]["num_samples"]
    assert list(reader.fields) == [f["name"] for f in info["fields"]]
    assert reader.page_size == info["header"]["page_size"] and reader.data_offset == info["data_region_start"]
    checked = 0
    for index in range(len(reader)):
        sample = reader[index]
        for field_name, field in reader.fields.items():
            expected = expected_arrays[f"{name}/{field_name}/{index}"]
            stored = reader.value_bytes(index, field_name)
            check_value(reader, field_name, field, index, sample[field_name], expected,
                        None if stored is None else bytes(stored))
            checked += 1
    assert checked == len(reader) * len(reader.fields)


def test_field_types_map_to_slipstream_fields(betons):
    fields = ss.Reader(betons["basic.beton"]).fields
    assert {n: type(f).__name__ for n, f in fields.items()} == {
        "label": "IntField", "value": "FloatField", "arr_f32": "NDArrayField", "ndarray_int16_x5": "NDArrayField",
        "arr_u8": "NDArrayField", "blob": "BytesField", "meta": "JSONField"}
    assert (fields["arr_f32"].dtype, fields["arr_f32"].shape) == (np.dtype("<f4"), (3, 4))
    assert (fields["arr_u8"].dtype, fields["arr_u8"].shape) == (np.dtype("u1"), (2, 3, 2))


def test_image_sizes_come_from_the_metadata(betons):
    reader = ss.Reader(betons["images_smart.beton"])
    samples = EXPECTED["images_smart.beton"]["samples"]
    assert len(samples) == len(reader)
    for name in reader.fields:
        records = reader.metadata[name]
        for index in range(len(reader)):
            image = reader[index][name]
            assert image.shape == (records["height"][index], records["width"][index], 3)


def test_convert_copies_every_value(betons, tmp_path):
    for name in FILES:
        source = ss.Reader(betons[name])
        result = ss.convert(betons[name], tmp_path / f"{name}.slip", page_size=4096, verbose=False)
        copy = ss.Reader(result.path)
        assert type(copy) is ss.Reader and len(copy) == len(source)
        for index in range(len(source)):
            for field in source.fields:
                a, b = source.value_bytes(index, field), copy.value_bytes(index, field)
                assert (a is None and b is None) or bytes(a) == bytes(b)
                assert pickle.dumps(source[index][field]) == pickle.dumps(copy[index][field])  # NaN, arrays


def test_damaged_beton_files(betons, tmp_path):
    data = betons["images.beton"].read_bytes()
    unfinished = bytearray(data)
    unfinished[16:24] = bytes(8)
    (tmp_path / "unfinished.beton").write_bytes(bytes(unfinished))
    with pytest.raises(ss.FormatError, match="unfinished.beton: FFCV's writer did not finish this file"):
        ss.Reader(tmp_path / "unfinished.beton")
    (tmp_path / "cut.beton").write_bytes(data[:-30])
    with pytest.raises(ss.FormatError, match="cut.beton: truncated or corrupt FFCV file"):
        ss.Reader(tmp_path / "cut.beton")
    (tmp_path / "short.beton").write_bytes(data[:3000])
    with pytest.raises(ss.FormatError, match="short.beton: truncated or corrupt FFCV file"):
        ss.Reader(tmp_path / "short.beton")
    custom = bytearray(data)
    custom[24] = 255  # the first field's type id: a custom FFCV field
    (tmp_path / "custom.beton").write_bytes(bytes(custom))
    with pytest.raises(ss.FormatError, match="field 'jpg' has FFCV type id 255, a custom FFCV field"):
        ss.Reader(tmp_path / "custom.beton")
    with pytest.raises(ss.ArgumentError, match="has no page checksums"):
        ss.Reader(betons["images.beton"], verify_pages=True)


def _with_descriptor(data: bytes, field: int, start: int, value: bytes) -> bytes:
    """``data`` with the bytes at ``start`` of field descriptor ``field`` replaced by ``value``."""
    changed = bytearray(data)
    at = 24 + 1041 * field + start
    changed[at:at + len(value)] = value
    return bytes(changed)


def test_inconsistent_beton_descriptors_are_refused_naming_the_file_and_field(betons, tmp_path):
    data = betons["basic.beton"].read_bytes()  # fields label, value, arr_f32 (float32, (3, 4)), ...
    dtype, sub_array = b'[["", "|O"]]', b'[["", "<f4", [3]]]'
    cases = {
        "repeated": (_with_descriptor(data, 1, 1, b"label".ljust(16, b"\0")), "field 1 has an empty or repeated "
                                                                              "name 'label'"),
        "empty": (_with_descriptor(data, 0, 1, bytes(16)), "field 0 has an empty or repeated name ''"),
        "object": (_with_descriptor(data, 2, 17 + 256, len(dtype).to_bytes(8, "little") + dtype),
                   "field 'arr_f32' .*NDArrayField needs a fixed-size dtype, got object"),
        "sub_array": (_with_descriptor(data, 2, 17 + 256, len(sub_array).to_bytes(8, "little") + sub_array),
                      "field 'arr_f32': unreadable NDArrayField arguments \\(a dtype entry of 3 parts"),
    }
    for name, (changed, problem) in cases.items():
        (tmp_path / f"{name}.beton").write_bytes(changed)
        with pytest.raises(ss.FormatError, match=f"{name}.beton: {problem}"):
            ss.Reader(tmp_path / f"{name}.beton")


def test_an_array_shape_too_large_for_any_file_is_refused_when_opened(betons, tmp_path):
    # (2**62 + 3) * 4 float32 values wrap around 2**64 to the 48 bytes arr_f32's (3, 4) values hold.
    shape = ((2**62 + 3).to_bytes(8, "little") + (4).to_bytes(8, "little"))
    (tmp_path / "huge.beton").write_bytes(_with_descriptor(betons["basic.beton"].read_bytes(), 2, 17, shape))
    with pytest.raises(ss.FormatError, match=r"huge.beton: field 'arr_f32' .*shape \(4611686018427387907, 4\) "
                                             r"would hold 73786976294838206512 bytes"):
        ss.Reader(tmp_path / "huge.beton")
    with pytest.raises(ValueError, match=r"RaggedField inner_shape \(4294967296, 4294967296\) would hold"):
        ss.RaggedField(np.uint8, (2**32, 2**32))
