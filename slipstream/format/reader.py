"""Reading datasets: a :class:`Reader` is a dataset's tables (parsed and
validated) plus a :class:`~slipstream.format.pagestore.PageSource`, where
its data pages are.  For a dataset file, the file is memory-mapped and
parsed by the parser its first bytes call for
(:mod:`slipstream.format.slipfile`, :mod:`slipstream.format.beton`), which
validates every table (bounds and checksum), so that nothing read later can
point outside the file; its source (:class:`~slipstream.format.file_pages.FileSource`)
is the guarded mapping, so that a file truncated under a reader becomes an
error instead of a SIGBUS.  Data pages are checked against their checksums
the first time they are read in a process, whatever their source.

Sharded datasets and URLs are opened by :func:`slipstream.open_dataset`
(:mod:`slipstream.format.sharded`)."""

from __future__ import annotations

import mmap
import os
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from slipstream.errors import ArgumentError, DatasetNotFoundError, FormatError, SampleIndexError, SlipstreamError
from slipstream.format import beton
from slipstream.format import layout as L
from slipstream.format import manifest as M
from slipstream.format.file_pages import FileSource
from slipstream.files import open_regular
from slipstream.format.pagestore import PageSource, PageStore
from slipstream.format.remote import is_url, local_path
from slipstream.format.slipfile import parse_slipstream
from slipstream.format.tables import Tables, UnknownField, format_error

PAGE_UNCHECKED, PAGE_GOOD, PAGE_CORRUPT = 0, 1, 2
"""States of a data page in :attr:`Reader.page_state`."""

__all__ = ["PAGE_CORRUPT", "PAGE_GOOD", "PAGE_UNCHECKED", "Reader", "UnknownField", "parse_file"]



def python_value(tables: Any, index: int, field: str, value_bytes: Callable[[], memoryview | None]) -> Any:
    """Field ``field`` of sample ``index`` of ``tables`` (a reader's, or a
    first epoch's) as a Python value, from its record and its stored bytes
    (``value_bytes()``).

    Raises:
        FormatError, DecodeError: the sample was recorded unreadable, or its
            value cannot be read; the message names the file, the sample,
            the field and the cause, and the exception's ``detail`` holds
            the cause alone.
    """
    where = f"{tables.path}: sample {index}, field {field!r}"
    if index in tables.unreadable:
        problem = f"the sample could not be written into the file: {tables.unreadable[index]}"
        raise FormatError(f"{where}: {problem}", detail=problem)
    try:
        return tables.fields[field].read(tables.metadata[index][field], value_bytes())
    except SlipstreamError as exc:
        raise type(exc)(f"{where}: {exc}", status=exc.status, detail=exc.detail or str(exc)) from exc
    except RecursionError:
        problem = f"its value is nested too deeply to read (over Python's recursion limit of " \
                  f"{sys.getrecursionlimit()} levels)"
        raise FormatError(f"{where}: {problem}", detail=problem) from None
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise FormatError(f"{where} cannot be read: {exc}", detail=str(exc)) from exc

class Reader:
    """A dataset file, memory-mapped and validated.

    ``Reader(path)`` opens a local slipstream file or FFCV ``.beton`` file;
    which parser reads it is chosen by the file's first bytes
    (:func:`parse_file`), and :attr:`format` says which it was.  A sharded
    dataset (a folder or prefix with a manifest, or the manifest itself) and
    any URL are opened by :func:`slipstream.open_dataset`, which returns a
    :class:`slipstream.format.sharded.ShardedReader` for them (the same
    interface over one index space) and a ``Reader`` for a local file.

    Attributes:
        path: the file.
        pages: where the data pages are (a
            :class:`~slipstream.format.pagestore.PageSource`): for a file,
            its guarded mapping.
        storage: the file's bytes (its mapping), for a dataset file.
        format: ``"slipstream"`` or ``"ffcv"``: the kind of file read.
        header: the file's header record, in its format's layout.
        descriptors: what the file says about each field.
        fields: field name -> field object.
        metadata: the per-sample records, a read-only structured array with
            one sub-record per field name.
        allocations: every stored value's sample, field, offset and size.
        user_metadata: the JSON object stored by the writer (e.g. ``classes``).
        unreadable: sample index -> why, for the samples the file holds no
            values for (its writer could not read or encode them; see
            :data:`~slipstream.format.layout.UNREADABLE_KEY`); usually empty.
        page_size, data_offset, page_count, data_size: where the pages are.
        page_lengths: each data page's length in bytes (the last one may be
            short; in a sharded dataset, each shard's last one).
        page_checksums: the CRC-32 of every data page, or ``None`` for a
            file written without them.
        page_state: per page, ``PAGE_UNCHECKED``, ``PAGE_GOOD`` or
            ``PAGE_CORRUPT``: each page is checked against its checksum the
            first time this process reads a value in it (:meth:`check_page`),
            and never again.
        pages_checked: checksums computed so far (each page's once).

    Args:
        path: the file.
        verify_pages: check every page's CRC-32 now (when the file has them),
            instead of each page when it is first read.

    Raises:
        DatasetNotFoundError: there is no such file.
        FormatError: the file is not a dataset file, or is damaged; the
            message names the file and what is wrong.
        ArgumentError: ``path`` is a URL or a sharded dataset, which
            :func:`slipstream.open_dataset` opens.
    """

    complete = True
    """Every sample's records are known (as opposed to the tables of a file
    whose samples are still arriving: :mod:`slipstream.format.arriving`)."""

    def __init__(self, path: str | os.PathLike, *, verify_pages: bool = False) -> None:
        if is_url(path):
            raise ArgumentError(f"{path} is a URL: Reader opens local files; open it with "
                                f"slipstream.open_dataset(path, remote=...), which returns a ShardedReader")
        self.path = local_path(path)
        source = FileSource(self.path, *_map_file(self.path))
        self.storage = source.storage
        self._use(parse_file(self.path, self.storage), source)
        if verify_pages:
            self.verify_pages()

    # ---------------------------------------------------------------- opening

    def _use(self, tables: Tables, pages: PageSource, page_lengths: np.ndarray | None = None) -> None:
        """Take what a parser read (or a combination of shards' tables) as
        this reader's tables, with every page still to be checked, and
        ``pages`` as where the pages are; ``page_lengths`` gives each page's
        length when the pages are not the tables' data cut every
        ``page_size`` bytes (shards, each with a short last page)."""
        self.pages = pages
        self.format, self.header = tables.format, tables.header
        self.descriptors, self.fields = list(tables.descriptors), dict(tables.fields)
        self.metadata, self.allocations = tables.metadata, tables.allocations
        self.user_metadata = tables.user_metadata
        self.unreadable = tables.unreadable
        self.page_size, self.data_offset = tables.page_size, tables.data_offset
        self.data_size, self.page_count = tables.data_size, tables.page_count
        if page_lengths is None:
            page_lengths = np.full(self.page_count, self.page_size, np.int64)
            if self.page_count:
                page_lengths[-1] = self.data_size - (self.page_count - 1) * self.page_size
        self.page_lengths = page_lengths
        self.page_checksums = tables.page_checksums
        self.page_state = np.full(self.page_count, PAGE_UNCHECKED if self.page_checksums is not None else PAGE_GOOD,
                                  np.uint8)
        self.pages_checked = 0

    def _fail(self, problem: str) -> FormatError:
        return format_error(self.path, problem)

    def _file_size(self) -> int:
        """The file's size in bytes."""
        return int(self.storage.size)

    def verify_pages(self) -> None:
        """Check every page against its stored CRC-32 now.

        Raises:
            FormatError: naming the first corrupt page and the samples in it.
            ArgumentError: the file was written without page checksums.
        """
        if self.page_checksums is None:
            raise ArgumentError(f"{self.path} has no page checksums (write it with page_checksums=True, or "
                                f"`slipstream write --page-checksums`, the default of both)")
        with ThreadPoolExecutor(self.pages.reads_at_once, thread_name_prefix="slipstream-checks") as pool:
            checks = [pool.submit(self.page_bytes, page) for page in range(self.page_count)]
            for check in checks:
                try:
                    check.result()
                except FormatError as exc:
                    pool.shutdown(wait=False, cancel_futures=True)
                    raise self._fail(str(exc)) from None

    def page_span(self, page: int) -> tuple[int, int]:
        """The offsets ``[start, end)`` of data page ``page`` in the tables'
        numbering (for a file, its offsets in the file)."""
        start = self.data_offset + page * self.page_size
        return start, start + int(self.page_lengths[page])

    def page_bytes(self, page: int) -> np.ndarray:
        """The bytes of data page ``page``, checked against its checksum.

        Raises:
            FormatError: the page does not match its checksum (naming it and
                the samples in it).
            StorageError, DatasetNotFoundError: a remote page cannot be had.
        """
        data = self.pages.read(page, *self.page_span(page))
        if not self.check_page(page, data):
            raise FormatError(self.page_report(page))
        return data

    def page_samples(self, page: int) -> list[int]:
        """The samples with bytes in data page ``page``."""
        start, end = self.page_span(page)
        rows = self.allocations[(self.allocations["offset"] < end)
                                & (self.allocations["offset"] + self.allocations["size"] > start)]
        return sorted({int(s) for s in rows["sample"]})

    def page_report(self, page: int, how: str = "") -> str:
        """What is wrong with a page that failed its check (``how``: in what
        circumstances, appended to it) and which samples it holds, in words."""
        return f"{self.page_problem(page)}{how}; samples in it: {short_list(self.page_samples(page))}"

    def page_store(self, os_cache: bool, pool_pages: int) -> PageStore:
        """A store of this dataset's pages in place, for one loader, made by
        its source: for a file, the file's mapping (``os_cache``), or a pool
        of ``pool_pages`` pages read as they are needed
        (:mod:`slipstream.format.file_pages`).  The caller closes it."""
        return self.pages.page_store(self, os_cache, pool_pages)

    def check_page(self, page: int, data: np.ndarray | None = None) -> bool:
        """Whether data page ``page`` matches its checksum.  The first call
        for a page computes the CRC-32 of ``data`` (the page's bytes as read
        elsewhere, e.g. into a page pool; default: read from :attr:`pages`) and
        records the result in :attr:`page_state`; later calls only look it
        up.  Always true for a file without page checksums.  A remote page
        is checked as it arrives (and read for that when ``data`` is None)."""
        if self.page_state[page] == PAGE_UNCHECKED:
            if data is None:
                try:
                    data = self.pages.read(page, *self.page_span(page))
                except FormatError:
                    if self.page_state[page] != PAGE_CORRUPT:
                        raise
            if self.page_state[page] == PAGE_UNCHECKED:  # not checked as it arrived
                good = L.crc32(data) == self.page_checksums[page]
                self.page_state[page] = PAGE_GOOD if good else PAGE_CORRUPT
                self.pages_checked += 1
        return bool(self.page_state[page] == PAGE_GOOD)

    def page_problem(self, page: int) -> str:
        """What is wrong with a page that failed its check, in words."""
        start, end = self.page_span(page)
        return (f"data page {page} (bytes {start:,} to {end:,}) does not match its checksum: the file is corrupt "
                f"there (a bad disk, memory or copy)")

    # ---------------------------------------------------------------- access

    def __len__(self) -> int:
        return len(self.metadata)

    def __getitem__(self, index: int) -> dict[str, Any]:
        """Sample ``index`` as Python values (images decoded to (H, W, 3) uint8)."""
        i = self._check_index(index)
        return {name: self.read(i, name) for name in self.fields}

    def read(self, index: int, field: str) -> Any:
        """One field of sample ``index`` as a Python value.

        Raises:
            FormatError, DecodeError: the value cannot be read; the message
                names the file, the sample, the field and the cause, and the
                exception's ``detail`` holds the cause alone.
        """
        i = self._check_index(index)
        if field not in self.fields:
            raise ArgumentError(f"{self.path} has no field {field!r} (fields: {', '.join(self.fields)})")
        return python_value(self, i, field, lambda: self._value_bytes(i, field))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self[i] for i in range(len(self)))

    def _check_index(self, index: int) -> int:
        if not isinstance(index, (int, np.integer)):
            raise TypeError(f"sample indices are integers, got {type(index).__name__}")
        i = int(index) + (len(self) if index < 0 else 0)
        if not 0 <= i < len(self):
            raise SampleIndexError(f"{self.path}: sample {int(index)} is out of range ({len(self)} samples)")
        return i

    def value_bytes(self, index: int, field: str) -> memoryview | None:
        """The stored bytes of one sample's field (``None`` for fields that
        keep their value in the record), after checking the pages they lie
        in (:meth:`check_page`).

        Raises:
            FormatError: a page of the value does not match its checksum.
        """
        try:
            return self._value_bytes(index, field)
        except FormatError as exc:
            raise FormatError(f"{self.path}: sample {index}, field {field!r}: {exc}", detail=exc.detail) from None

    def _value_bytes(self, index: int, field: str) -> memoryview | None:
        record = self.metadata[index][field]
        if "offset" not in (record.dtype.names or ()):
            return None
        offset, size = int(record["offset"]), int(record["size"])
        if not size:
            return memoryview(b"")
        first, last = (offset - self.data_offset) // self.page_size, (offset + size - 1 - self.data_offset) \
            // self.page_size
        parts = []
        for page in range(first, last + 1):
            try:
                data = self.page_bytes(page)
            except FormatError as exc:
                raise FormatError(str(exc), detail=str(exc)) from None
            start = self.page_span(page)[0]
            parts.append(data[max(0, offset - start): offset + size - start])
        return memoryview(parts[0] if len(parts) == 1 else np.concatenate(parts))

    def index(self, field: str) -> dict[Any, np.ndarray]:
        """Value -> indices of the samples that have it, for a field with one
        scalar per sample (``IntField``, ``FloatField``), e.g. the samples of
        each class for building subsets."""
        if field not in self.fields:
            raise ArgumentError(f"{self.path} has no field {field!r} (fields: {', '.join(self.fields)})")
        names = self.metadata.dtype[field].names
        if names != ("value",):
            raise ArgumentError(f"index() needs a field with one scalar per sample; {field!r} is "
                                f"{self.fields[field]!r}")
        values = self.metadata[field]["value"]
        order = np.argsort(values, kind="stable")
        keys, starts = np.unique(values[order], return_index=True)
        groups = np.split(order, starts[1:])
        return {key.item(): group for key, group in zip(keys, groups)}

    def verify(self) -> None:
        """Check that what the reader opened did not change since: for a
        file, that ``path`` still holds the file this reader opened, as it
        was (the same file, not another one renamed over it or written in
        its place, of the same size, not modified since), and that no page
        of the mapping was lost to truncation
        (:meth:`~slipstream.format.file_pages.FileSource.verify`).

        A reader keeps reading the file it opened, whatever happens to the
        path; but a file truncated or rewritten in place changes under it.
        Touching a mapped page past a truncated end would kill the process
        with SIGBUS; the reader's mapping is guarded
        (:func:`slipstream.native.guard_mapping`), so such a page reads as
        zeros instead, and this check then fails.  Loaders call it after
        every batch, before they hand the batch on, so that nothing read
        from a changed file reaches a training step.

        Raises:
            FormatError: naming the file and what changed.
        """
        self.pages.verify()

    def close(self) -> None:
        """Let the pages go (arrays taken from the reader keep a file's mapping alive)."""
        self.metadata = self.allocations = self.storage = None  # type: ignore[assignment]
        self.pages.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}: {f!r}" for n, f in self.fields.items())
        return f"{type(self).__name__}({str(self.path)!r}, {len(self)} samples, {{{fields}}})"


def parse_file(path: str | os.PathLike, data: np.ndarray) -> Tables:
    """The validated tables of the dataset file ``path`` whose bytes are
    ``data``, read by the parser its first bytes call for: slipstream's
    magic (:data:`slipstream.format.layout.MAGIC`) or an FFCV version-2
    header.

    Raises:
        FormatError: naming the file and what is wrong, also when its first
            bytes are neither format's.
        ArgumentError: the file is a sharded dataset's manifest.
    """
    head = bytes(data[:max(len(L.MAGIC), beton.HEADER.itemsize)])
    # A file cut inside the magic is still taken for a slipstream file, to be reported as truncated.
    if head[:len(L.MAGIC)] == L.MAGIC[:len(head)]:
        return parse_slipstream(path, data.size, lambda offset, size: data[offset: offset + size])
    if beton.is_beton_header(head):
        return beton.parse_beton(path, data)
    if M.looks_like_manifest(bytes(data[:4096])):
        raise _sharded(path, "the manifest of a sharded dataset")
    tar = " but a tar file: read it as a source, slipstream.WebDataset(path), or give its path to " \
          "slipstream.Loader or slipstream.write, which convert it" if bytes(data[257:262]) == b"ustar" else ""
    raise format_error(path, f"not a slipstream dataset (starts with {head[:len(L.MAGIC)]!r}, expected "
                             f"{L.MAGIC!r}) nor an FFCV .beton file (no FFCV version-{beton.VERSION} header){tar}")


def _sharded(path: str | os.PathLike, what: str) -> ArgumentError:
    """The error for a sharded dataset given to :class:`Reader`."""
    return ArgumentError(f"{path} is {what}: Reader opens one dataset file; open it with "
                         f"slipstream.open_dataset(path), which returns a ShardedReader")


def short_list(values: list[int], limit: int = 8) -> str:
    """``values`` in words, the first ``limit`` of them shown."""
    shown = ", ".join(map(str, values[:limit]))
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "") if values else "none"


def _map_file(path: Path) -> tuple[mmap.mmap, os.stat_result]:
    try:
        fd = open_regular(path, error=FormatError)  # a FIFO is refused, not waited on
    except FileNotFoundError:
        raise DatasetNotFoundError(f"{path}: no such dataset file") from None
    except FormatError:
        if not path.is_dir():
            raise
        if (path / M.NAME).is_file():
            raise _sharded(path, f"a sharded dataset (a folder with a {M.NAME})") from None
        raise FormatError(f"{path} is a folder, not a dataset file") from None
    try:
        stat = os.fstat(fd)
        if stat.st_size == 0:
            raise FormatError(f"{path}: the file is empty")
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ), stat
    finally:
        os.close(fd)
