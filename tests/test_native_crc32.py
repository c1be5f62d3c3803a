"""slip_crc32: zlib's CRC-32 exactly, on every length, alignment and
continuation, through both its carry-less-multiplication and table paths."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import numpy as np
import pytest

from slipstream import native

CRC32_C = Path(__file__).resolve().parent.parent / "native" / "src" / "crc32.c"
P = 0x104C11DB7  # the CRC-32 polynomial, with its x^32 term


def pmod(a: int, p: int = P) -> int:
    """a(x) mod p(x) over GF(2)."""
    while a.bit_length() >= p.bit_length():
        a ^= p << (a.bit_length() - p.bit_length())
    return a


def pdiv(a: int, p: int = P) -> int:
    """floor(a(x) / p(x)) over GF(2)."""
    q = 0
    while a.bit_length() >= p.bit_length():
        shift = a.bit_length() - p.bit_length()
        q |= 1 << shift
        a ^= p << shift
    return q


def reverse(value: int, bits: int) -> int:
    return int(format(value, f"0{bits}b")[::-1], 2)


def test_folding_constants_are_what_the_polynomial_gives():
    k = lambda n: reverse(pmod(1 << n), 32) << 1  # noqa: E731
    expected = {"K_FOLD_512_LO": k(4 * 128 + 32), "K_FOLD_512_HI": k(4 * 128 - 32), "K_FOLD_128_LO": k(128 + 32),
                "K_FOLD_128_HI": k(128 - 32), "K_FOLD_64": k(64), "P_REFLECTED": reverse(P, 33),
                "MU_REFLECTED": reverse(pdiv(1 << 64), 33)}
    source = CRC32_C.read_text()
    for name, value in expected.items():
        found = re.search(rf"#define {name} (0x[0-9a-f]+)ull", source)
        assert found and int(found[1], 16) == value, name


@pytest.mark.parametrize("offset", [0, 1, 7, 8, 13])
def test_every_length_and_alignment_matches_zlib(offset):
    rng = np.random.default_rng(offset)
    data = rng.integers(0, 256, 700 + offset, dtype=np.uint8).tobytes()
    for length in range(0, 700):
        chunk = data[offset: offset + length]
        start = int(rng.integers(0, 2**32))
        assert native.crc32(chunk, start) == zlib.crc32(chunk, start), length


def test_large_buffers_and_continuation_match_zlib():
    rng = np.random.default_rng(5)
    data = rng.integers(0, 256, (9 << 20) + 37, dtype=np.uint8)
    whole = zlib.crc32(data)
    assert native.crc32(data) == whole
    crc = 0
    for piece in np.array_split(data, 11):  # uneven pieces, as the writer feeds page parts
        crc = native.crc32(piece, crc)
    assert crc == whole
    assert native.crc32(b"") == 0 and native.crc32(b"", 12345) == 12345
    assert native.crc32(np.zeros(0, np.uint8)) == 0
