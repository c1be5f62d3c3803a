"""Tar archives read front to back as a stream, header by header, checking
what :mod:`tarfile` lets pass: an archive cut short (at a block boundary or
inside a header, which :mod:`tarfile` takes for a normal end), a member
claiming more bytes than the archive holds or than a sample may hold, sparse
members (whose holes :mod:`tarfile` would fill in memory), and extended
headers of any size.  Every size is checked against what the archive holds
before anything is allocated for it.

The formats read are those tar writers produce: POSIX ustar and pax
(extended headers ``x``, and Solaris tar's ``X``, global headers ``g``) and GNU (long names ``L``
and ``K``); sparse members (GNU ``S`` and pax ``GNU.sparse``) are refused
one by one, the archive read on past them, as are hard and symbolic links.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator
from typing import BinaryIO

from slipstream.errors import FormatError

BLOCK = 512
"""The tar block: headers take one, member data is padded to a multiple."""

MAX_MEMBER_SIZE = 1 << 30
"""The most bytes a member may hold (1 GiB): a sample's image, label or
caption is far smaller, so a header claiming more is damaged or forged; such
a member is refused without being read."""

MAX_HEADER_DATA = 1 << 20
"""The most bytes of an extended header (pax records, a GNU long name)."""

_REGULAR = (b"0", b"\0", b"7")
_NO_DATA = (b"1", b"2", b"3", b"4", b"5", b"6")
"""Links, devices, folders and FIFOs: their size field says nothing of the
data that follows (there is none), as :mod:`tarfile` reads them."""
_LINKS = {b"1": "hard", b"2": "symbolic"}

_SKIP_CHUNK = 1 << 20
_ZEROS = bytes(BLOCK)


class TarDamage(FormatError):
    """The archive is truncated or corrupt at a point: nothing after it can
    be read.

    Attributes:
        member: the member whose data was being read, or ``""`` when the
            damage is in a header or between members.
    """

    def __init__(self, message: str, member: str = "") -> None:
        super().__init__(message)
        self.member = member


@dataclasses.dataclass(frozen=True)
class Member:
    """A regular file of the archive.

    Attributes:
        name: its path in the archive.
        offset: where its header starts (of its extended headers, the first).
        data: its content, or ``None`` when it was refused (:attr:`refusal`).
        refusal: why it was not read (a link, a sparse file, or more bytes
            than :data:`MAX_MEMBER_SIZE`), else ``""``.
    """

    name: str
    offset: int
    data: bytes | None
    refusal: str = ""


class _Reader:
    """The archive's bytes in order, counting the position and refusing to
    read past the size the archive had when it was opened."""

    def __init__(self, stream: BinaryIO, size: int) -> None:
        self.stream, self.size, self.position = stream, size, 0

    def left(self) -> int:
        return self.size - self.position

    def read(self, count: int, what: str, member: str = "") -> bytes:
        """Exactly ``count`` bytes of ``what`` (part of ``member``, if of
        one); a short read is truncation."""
        data = self.stream.read(count) if count else b""
        self.position += len(data)
        if len(data) != count:
            raise TarDamage(f"the tar shard is truncated: it ends at byte {self.position}, "
                            f"{len(data)} bytes into {what}", member)
        return data

    def skip(self, count: int, what: str, member: str) -> None:
        """Go past ``count`` bytes of ``what`` (part of ``member``, which
        holds them: :func:`_body` checks) without keeping them: a seek in a
        file, reads of a stream."""
        if self.stream.seekable():
            self.stream.seek(count, io.SEEK_CUR)
            self.position += count
            return
        while count:
            step = min(count, _SKIP_CHUNK)
            self.read(step, what, member)
            count -= step


def members(stream: BinaryIO, size: int, read_data: bool = True) -> Iterator[Member]:
    """The regular files of the tar archive ``stream`` of ``size`` bytes, in
    order, and its hard and symbolic links, refused (:attr:`Member.refusal`:
    a link's content is another member's, or outside the archive).  Other
    entries (folders, devices) are passed over.  With
    ``read_data`` false, every member's data is passed over (a seek in a
    file) and given as ``b""``: the same members, found by their headers
    alone (the damage found is the same too, sizes being checked against
    the archive's before any data is read).

    Raises:
        TarDamage: the archive ends before its end-of-archive marker (a block
            of zeros), a header is corrupt, a member or extended header
            claims more bytes than the archive holds, or data follows the end
            marker; the message says where.
    """
    reader = _Reader(stream, size)
    global_records: dict[str, str] = {}
    while True:
        start = reader.position
        if reader.left() == 0:
            raise TarDamage(f"the tar shard is truncated: it ends at byte {start} without the end-of-archive "
                            f"marker")
        block = reader.read(BLOCK, "a member header")
        if block == _ZEROS:
            _check_trailer(reader, start)
            return
        member = _member(reader, block, start, global_records, read_data)
        if member is not None:
            yield member


def _member(reader: _Reader, block: bytes, start: int, global_records: dict[str, str],
            read_data: bool) -> Member | None:
    """The member whose headers begin with ``block`` (read at ``start``):
    extended headers are read and applied to the header that follows them."""
    records = dict(global_records)
    long_name: str | None = None
    long_link: str | None = None
    while True:
        header = _Header.parse(block, reader.position - BLOCK)
        if header.kind in (b"x", b"X", b"g", b"L", b"K"):
            data = _extension_data(reader, header)
            if header.kind in (b"x", b"X"):  # X: Solaris tar's, as tarfile reads it
                records.update(_pax_records(data, header.offset))
            elif header.kind == b"g":
                global_records.update(_pax_records(data, header.offset))
                records.update(global_records)
            elif header.kind == b"L":
                long_name = _text(data.split(b"\0", 1)[0])
            else:
                long_link = _text(data.split(b"\0", 1)[0])
            block = reader.read(BLOCK, "a member header")
            continue
        name = records.get("path", long_name if long_name is not None else header.name)
        size = _pax_size(records, header) if "size" in records else header.size
        if header.kind in _LINKS:
            target = records.get("linkpath", long_link if long_link is not None else header.link_name())
            return _link(header, name, target, start)
        return _body(reader, header, name, size, records, start, read_data)


def _link(header: _Header, name: str, target: str, start: int) -> Member | None:
    """A link: refused, unless it names a folder (its data, if any, is a
    file's the archive holds elsewhere, which no sample member may share)."""
    if name.endswith("/"):
        return None
    return Member(name, start, None, f"member {name!r} (at byte {start}) is a {_LINKS[header.kind]} link to "
                                     f"{target!r}, which a sample member cannot be: it is not read")


def _body(reader: _Reader, header: _Header, name: str, size: int, records: dict[str, str],
          start: int, read_data: bool) -> Member | None:
    """Read (or pass over) the data of the entry ``header`` describes."""
    if header.kind in _NO_DATA or (header.kind in (b"0", b"\0") and name.endswith("/")):
        return None
    sparse = header.kind == b"S" or any(key.startswith("GNU.sparse.") for key in records)
    name = records.get("GNU.sparse.name", name)  # a pax sparse file's own name (its path is made up)
    where = f"member {name!r} (at byte {start})"
    if header.kind == b"S":
        _skip_sparse_extensions(reader, header)
    padded = size + (-size % BLOCK)
    if padded > reader.left():
        raise TarDamage(f"the tar shard is truncated (or its header corrupt): {where} claims {size:,} bytes of data, "
                        f"but the shard ends {reader.left():,} bytes after its header", name)
    refusal = ""
    if sparse:
        claimed = header.sparse_size() if header.kind == b"S" else \
            records.get("GNU.sparse.realsize", records.get("GNU.sparse.size", "?"))
        refusal = f"{where} is a sparse file (of {claimed} bytes once expanded), which a sample member cannot be"
    elif size > MAX_MEMBER_SIZE:
        refusal = f"{where} holds {size:,} bytes, more than the {MAX_MEMBER_SIZE:,} a sample member may hold"
    if refusal or header.kind not in _REGULAR:  # refused, or an entry of a type tar readers pass over
        reader.skip(padded, f"the data of {where}", name)
        return Member(name, start, None, refusal + ": it is not read") if refusal else None
    if not read_data:
        reader.skip(padded, f"the data of {where}", name)
        return Member(name, start, b"")
    data = reader.read(size, f"the data of {where}", name)
    reader.read(padded - size, f"the padding of {where}", name)
    return Member(name, start, data)


def _extension_data(reader: _Reader, header: _Header) -> bytes:
    """The content of an extended header (pax records, a GNU long name)."""
    what = f"the extended header at byte {header.offset}"
    if header.size > MAX_HEADER_DATA:
        raise TarDamage(f"the tar shard is corrupt: {what} claims {header.size:,} bytes, more than the "
                        f"{MAX_HEADER_DATA:,} an extended header may hold")
    padded = header.size + (-header.size % BLOCK)
    if padded > reader.left():
        raise TarDamage(f"the tar shard is truncated: {what} holds {header.size:,} bytes, but the shard ends "
                        f"{reader.left():,} bytes after it")
    data = reader.read(header.size, what)
    reader.read(padded - header.size, what)
    return data


def _skip_sparse_extensions(reader: _Reader, header: _Header) -> None:
    """Read past the extension blocks of a GNU sparse header (each ends
    with a flag saying whether another follows)."""
    more = header.block[482]
    while more:
        more = reader.read(BLOCK, f"a sparse extension block of the member at byte {header.offset}")[504]


def _check_trailer(reader: _Reader, marker: int) -> None:
    """What follows the end-of-archive marker must be zeros (the marker's
    second block and the padding to a record): anything else is a header
    zeroed in the middle of the archive, or archives joined end to end, and
    the members after it would be lost without a word."""
    while reader.left():
        chunk = reader.read(min(reader.left(), _SKIP_CHUNK), "the end of the shard")
        if chunk.count(0) != len(chunk):
            raise TarDamage(f"the tar shard is corrupt: a block of zeros at byte {marker} marks the end of the "
                            f"archive, but data follows it (a zeroed header, or archives joined end to end)")


@dataclasses.dataclass(frozen=True)
class _Header:
    """One 512-byte tar header, its checksum verified."""

    block: bytes
    offset: int
    name: str
    size: int
    kind: bytes

    @classmethod
    def parse(cls, block: bytes, offset: int) -> _Header:
        """The header in ``block``, read at ``offset``.

        Raises:
            TarDamage: its checksum fails or a number field is malformed.
        """
        corrupt = f"the tar shard is corrupt: the header at byte {offset}"
        stored = _number(block[148:156], f"{corrupt} has a malformed checksum field")
        field = block[148:156]
        unsigned = sum(block) - sum(field) + 8 * 0x20  # the checksum field counts as spaces
        # Writers that add signed bytes count each byte over 127 as 256 less.
        if stored != unsigned and stored != unsigned - 256 * (_high_bytes(block) - _high_bytes(field)):
            raise TarDamage(f"{corrupt} fails its checksum (it is damaged, or the file is not a tar archive)")
        name = block[:100].split(b"\0", 1)[0]
        if block[257:263] == b"ustar\0":  # POSIX ustar: long paths are split into a prefix and a name
            prefix = block[345:500].split(b"\0", 1)[0]
            name = prefix + b"/" + name if prefix else name
        size = _number(block[124:136], f"{corrupt} has a malformed size field")
        return cls(block, offset, _text(name), size, block[156:157])

    def link_name(self) -> str:
        """The path a link header points to."""
        return _text(self.block[157:257].split(b"\0", 1)[0])

    def sparse_size(self) -> int:
        """The size a GNU sparse member claims to expand to."""
        return _number(self.block[483:495], f"the tar shard is corrupt: the sparse header at byte {self.offset} has "
                                            f"a malformed size field")


def _high_bytes(data: bytes) -> int:
    """How many bytes of ``data`` are over 127."""
    return len(data) - len(data.translate(None, _HIGH))


_HIGH = bytes(range(128, 256))


def _number(field: bytes, problem: str) -> int:
    """A header's number field: octal digits (ended by a NUL or a space), or
    GNU's base-256 (the first byte's high bit set) for large values."""
    if field and field[0] & 0x80:
        if field[0] != 0x80:  # 0xff starts a negative number: no size or checksum is negative
            raise TarDamage(problem)
        return int.from_bytes(field[1:], "big")
    digits = field.split(b"\0", 1)[0].strip(b" ")
    if digits.translate(None, b"01234567"):  # anything but octal digits
        raise TarDamage(f"{problem} ({field!r})")
    return int(digits, 8) if digits else 0


def _pax_records(data: bytes, offset: int) -> dict[str, str]:
    """The ``"<length> <key>=<value>\\n"`` records of a pax header."""
    records, position = {}, 0
    while position < len(data):
        if not any(data[position:]):
            break  # trailing NULs, as some writers leave
        space = data.find(b" ", position)
        length = data[position:space]
        if space < 0 or not length.isdigit() or len(length) > 9 or not 0 < int(length) <= len(data) - position:
            raise TarDamage(f"the tar shard is corrupt: the pax header at byte {offset} has a malformed record at "
                            f"byte {position} of its data")
        record = data[space + 1:position + int(length)]
        key, equals, value = record.partition(b"=")
        if not equals or not record.endswith(b"\n"):
            raise TarDamage(f"the tar shard is corrupt: the pax header at byte {offset} has a malformed record "
                            f"{record[:40]!r}")
        records[_text(key)] = _text(value[:-1])
        position += int(length)
    return records


def _pax_size(records: dict[str, str], header: _Header) -> int:
    """The ``size`` a pax header gives the member after it."""
    value = records["size"]
    if not (value.isascii() and value.isdigit() and len(value) <= 20):
        raise TarDamage(f"the tar shard is corrupt: the pax header before byte {header.offset} gives the size "
                        f"{value[:40]!r}, not a decimal number")
    return int(value)


def _text(raw: bytes) -> str:
    """A name or pax value as text: UTF-8, any other byte written as an
    escape (so that names stay distinct and printable)."""
    return raw.decode("utf-8", "backslashreplace")
