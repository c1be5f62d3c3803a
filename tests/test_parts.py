"""Parts, the encoded samples a distributed write sets aside: read back as
written, in any range, and refused when damaged."""

from __future__ import annotations

import numpy as np
import pytest

import slipstream as ss
from slipstream.fields.base import Encoded
from slipstream.format import layout as L
from slipstream.format.location import LocalFolder
from slipstream.format.parts import read_part, write_part


def descriptors():
    fields = {"data": ss.BytesField(), "label": ss.IntField()}
    return [L.FieldDescriptor(f.type_id, n, f.arguments(), L.record_spec(f.record_dtype())) for n, f in fields.items()]


def samples(count):
    return [[Encoded({}, bytes([k % 251]) * (k * 37 % 1000)), Encoded({"value": k})] for k in range(count)]


def test_parts_read_back_any_range(tmp_path, monkeypatch):
    import slipstream.format.parts as parts

    monkeypatch.setattr(parts, "READ_BYTES", 4096)  # many reads per range
    location = LocalFolder(tmp_path / "parts")
    written = samples(300)
    write_part(location, "p", descriptors(), written)
    for start, stop in ((0, 300), (17, 18), (120, 299), (5, 5)):
        back = list(read_part(location, "p", descriptors(), start, stop))
        assert [(bytes(a.data), b.record["value"]) for a, b in back] == \
            [(a.data, b.record["value"]) for a, b in written[start:stop]]


def test_damaged_parts_are_refused_by_name(tmp_path):
    location = LocalFolder(tmp_path / "parts")
    write_part(location, "p", descriptors(), samples(50))
    path = tmp_path / "parts" / "p"
    data = bytearray(path.read_bytes())
    data[1000] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ss.FormatError, match=r"parts/p: sample \d+: the stored values fail their CRC-32"):
        list(read_part(location, "p", descriptors(), 0, 50))
    path.write_bytes(bytes(data[:-10]))
    with pytest.raises(ss.FormatError, match="parts/p: not a part of these fields"):
        list(read_part(location, "p", descriptors(), 0, 50))


def test_parts_in_memory_read_back_and_travel_out_of_band():
    import pickle

    from slipstream.format.parts import pack_part

    written = samples(120)
    part = pack_part(descriptors(), written)
    buffers = []
    back = pickle.loads(pickle.dumps(part, protocol=5, buffer_callback=buffers.append), buffers=buffers)
    assert len(buffers) >= len(written)  # the values are handed over out of band, not copied into the pickle
    for start, stop in ((0, 120), (33, 34), (7, 7)):
        read = list(back.samples(descriptors(), start, stop, "part 3"))
        assert [(bytes(a.data), b.record["value"]) for a, b in read] == \
            [(a.data, b.record["value"]) for a, b in written[start:stop]]
    damaged = np.array(part.values[5])  # sample 5's data (the label is kept in its record)
    damaged[0] ^= 0xFF
    part.values[5] = damaged
    with pytest.raises(ss.FormatError, match=r"part 3: sample 5: the stored values fail their CRC-32"):
        list(part.samples(descriptors(), 0, 120, "part 3"))
