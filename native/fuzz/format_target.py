"""What the file-format fuzz harness runs on one input, without atheris, so
that the test suite can replay the inputs fuzzing once broke
(native/fuzz/regressions/format) through exactly the same code.

An input may be refused only with a :class:`slipstream.SlipstreamError`;
any other exception, a crash or a hang is a finding.  Most mutations of a
slipstream file break a CRC-32 and are refused at once; so for inputs whose
first byte is even, the checksums are recomputed first (that byte dropped),
which lets mutations reach the tables behind them.
"""

from __future__ import annotations

import os
import tempfile
import warnings

import numpy as np

import slipstream as ss
from slipstream.format import layout as L
from slipstream.ops import CenterCrop

_TABLES = ("descriptors", "metadata", "allocations", "user", "page_checksums")
_SCHEMAS_COMPILED: set[tuple] = set()
_MAX_SCHEMAS = 6  # distinct field sets the loader compiles pipelines for; others are only parsed
_FOLDER = tempfile.mkdtemp(prefix="slipstream-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)


def fix_checksums(data: bytes) -> bytes:
    """data with the header's table CRC-32s and its own recomputed, where
    the header is long enough and the tables lie inside the data."""
    if len(data) < L.HEADER_DTYPE.itemsize or not data.startswith(L.MAGIC):
        return data
    buf = bytearray(data)
    header = np.frombuffer(buf, L.HEADER_DTYPE, 1)[0].copy()
    sizes = {"descriptors": int(header["descriptors_size"]), "metadata": int(header["metadata_size"]),
             "allocations": int(header["allocation_count"]) * L.ALLOCATION_DTYPE.itemsize,
             "user": int(header["user_size"]), "page_checksums": 4 * int(header["page_count"])}
    for name in _TABLES:
        offset, size = int(header[f"{name}_offset"]), sizes[name]
        if 0 <= offset and 0 <= size and offset + size <= len(buf):
            header[f"{name}_crc32"] = L.crc32(bytes(buf[offset:offset + size]))
    buf[:L.HEADER_DTYPE.itemsize] = header.tobytes()
    header["header_crc32"] = L.crc32(bytes(buf[:L.HEADER_CRC_SPAN]))
    buf[:L.HEADER_DTYPE.itemsize] = header.tobytes()
    return bytes(buf)


def load_everything(reader: ss.Reader) -> None:
    """Every sample through the reader, then one epoch through a loader."""
    for i in range(min(len(reader), 64)):
        try:
            reader[i]
        except ss.SlipstreamError:
            pass
    schema = tuple((name, type(field).__name__) for name, field in reader.fields.items())
    if schema not in _SCHEMAS_COMPILED and len(_SCHEMAS_COMPILED) >= _MAX_SCHEMAS:
        return
    _SCHEMAS_COMPILED.add(schema)
    pipelines = {name: [CenterCrop(16)] for name, field in reader.fields.items()
                 if isinstance(field, ss.RGBImageField)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ss.SampleWarning)
        with ss.Loader(reader, 4, pipelines, order="sequential", verbose=False, on_error="skip",
                       indices=range(min(len(reader), 16))) as loader:
            for _ in loader:
                pass


def test_one_input(data: bytes) -> None:
    """Open data as a dataset file and load all of it; return quietly when
    slipstream refuses it with one of its own errors."""
    if data and data[0] % 2 == 0:
        data = fix_checksums(data[1:])
    path = os.path.join(_FOLDER, "input.slip" if data.startswith(L.MAGIC) else "input.beton")
    with open(path, "wb") as f:
        f.write(data)
    try:
        reader = ss.Reader(path)
    except ss.SlipstreamError:
        return
    try:
        load_everything(reader)
    except ss.SlipstreamError:
        pass
    finally:
        reader.close()
