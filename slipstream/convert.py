"""Turning sources into dataset files: :func:`write`; :func:`cached`,
which builds a file once per distinct source and field specification; and
:func:`convert`, which copies any readable dataset file (FFCV's included)."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import inspect
import json
import os
import re
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from slipstream import cache_files, cache_use, native
from slipstream.cache import datasets_dir, made_folder
from slipstream.errors import ArgumentError, CacheWarning
from slipstream.files import lock_removable, unlock_removable
from slipstream.fields import Encoded, RGBImageField
from slipstream.fields.image import JPEG_MODE, check_stored_size, tiled_jpeg
from slipstream.fields.image_modes import RAW_MODE, YUV420_MODE
from slipstream.format import Reader, layout, open_dataset
from slipstream.format.remote import Remote, is_url
from slipstream.format.shared_copy import SharedCopy
from slipstream.format.write import write_dataset
from slipstream.format.writer import WriteResult, stored_record
from slipstream.sources import as_source, source_at
from slipstream.sources.adapters import identity_of
from slipstream.sources.identity import source_identity, source_location
from slipstream.sources.protocol import writer_input
from slipstream.sources.registry import adapt


def write(
    path: str | os.PathLike,
    source: Any,
    fields: Mapping[str, Any] | None = None,
    *,
    workers: int | None = None,
    page_size: int = layout.DEFAULT_PAGE_SIZE,
    page_checksums: bool = True,
    on_error: str = "raise",
    user_metadata: Mapping[str, Any] | None = None,
    verbose: bool = True,
    shard_size: int | str | None = None,
    shards: int | None = None,
    remote: Remote | None = None,
    overwrite: bool = False,
) -> WriteResult:
    """Write a dataset file from ``source``, or a sharded dataset.

    Example::

        slipstream.write("s3://bucket/imagenet/train", "/data/imagenet/train", shard_size="1GB")

    Args:
        path: the file to create, in a folder that exists; with
            ``shard_size`` or ``shards``, or for a URL
            (``s3://bucket/prefix``), the folder or prefix of a sharded
            dataset: shard files and a manifest, written last.
        source: an image folder (``root/<class>/<image>``, or a flat folder
            of images, all labelled 0; see
            :class:`~slipstream.sources.ImageFolder`: fields ``image`` and
            ``label``, class names stored as ``classes`` in the user
            metadata), a NumPy array, a tuple/list or dict of equal-length
            arrays, or any object with ``len()`` and ``[i]`` giving a tuple
            or a dict per sample (e.g. a Hugging Face ``datasets.Dataset``).
        fields: field name -> field (e.g. ``{"image": RGBImageField(),
            "label": IntField()}``), in the order of each sample's values.
            Optional for folders and dicts of arrays.
        workers: encoding processes (default: one per core; 0: none, encode
            in this process).  They are forked from this process, except
            where that would fork a running thread pool (parallel Numba
            code of the user's ran), or where this process may not have
            children (a daemonic process, such as a ``multiprocessing.Pool``
            worker: a ``RuntimeWarning`` says so): there they are threads
            of this process.
            The file is the same whatever the number.
        page_size: bytes per page, a power of two (default 8 MiB).
        page_checksums: store a CRC-32 per page (default), checked by readers
            the first time they read the page (see ``Reader.check_page``).
        on_error: ``"raise"`` (default) or ``"skip"`` samples that cannot be
            encoded, e.g. undecodable images; skipped ones are reported in
            the result.
        user_metadata: a JSON object to store, merged over the source's own.
        verbose: progress bar (shown only on a terminal).
        shard_size: bytes of data per shard (an int or a text such as
            ``"1GB"``; default for a URL: 1 GB).
        shards: at most this many shards, of about equal sample counts,
            instead: a shard ends only where a new data page starts (so
            that the pages are those of one file), so a dataset of fewer
            pages than ``shards`` has fewer shards (``page_size`` smaller
            gives more).
        remote: object-store options (:class:`slipstream.Remote`) for a URL.
        overwrite: replace a dataset already at ``path`` (the old one stays
            whole until the new one is complete).  Without it, a file (or a
            sharded dataset) already there is refused before anything is
            encoded.

    Returns:
        A :class:`~slipstream.format.WriteResult`: path, sample count,
        skipped samples, shard names.

    Raises:
        FileExistsError: ``path`` exists and ``overwrite`` is off.
        FileNotFoundError: the folder that is to hold the file does not exist.
    """
    samples, fields, meta = as_source(source, fields)
    return write_dataset(path, samples, fields, workers=workers, page_size=page_size, page_checksums=page_checksums,
                         on_error=on_error, user_metadata={**meta, **(user_metadata or {})}, verbose=verbose,
                         shard_size=shard_size, shards=shards, remote=remote, overwrite=overwrite)


def default_cache_dir() -> Path:
    """``$SLIPSTREAM_CACHE_DIR/datasets``, else ``~/.cache/slipstream/datasets``."""
    return datasets_dir()


def cached(
    source: Any,
    fields: Mapping[str, Any] | None = None,
    cache_dir: str | os.PathLike | None = None,
    *,
    name: str | None = None,
    version: str | int | None = None,
    workers: int | None = None,
    page_size: int = layout.DEFAULT_PAGE_SIZE,
    verbose: bool = True,
    remote: Remote | None = None,
    write_mode: str | None = None,
) -> Path:
    """The path of a dataset file built from ``source``: written on first
    use, reused afterwards.

    The file name carries a hash of what identifies the source (see
    :mod:`slipstream.sources.identity`: for a folder, a ``COCODetection``
    or a ``SegmentationFolder``, every file's path, size and modification
    time, and the annotations; for ``WebDataset`` shards, their names, sizes
    and modification times or ETags; for a ``LitData`` dataset, its index;
    for a Hugging Face dataset, its fingerprint; for anything else,
    ``name`` and ``version``), the fields and the format version.
    Changing any of them builds a new file; the copy it replaces (same
    source location and fields) is removed once no process holds it (see
    :mod:`slipstream.cache_files`; ``slipstream cache list`` and
    :func:`slipstream.cache.list` show the cache).  The file is logged
    (``slipstream.cache`` logger) with where it goes and about how big it
    will be.  An identity does not see a file whose bytes change while its
    size and modification time do not: touch the changed files, or remove
    the cached file (``slipstream cache prune``).
    Processes asking for the same file at once (e.g. the ranks of a
    distributed job on one machine) build it once: one writes while holding
    a lock, the others wait for it, then reuse the file.

    Args:
        source, fields, workers, page_size: as for :func:`write`; a path or
            URL is read as :func:`~slipstream.sources.source_at` says (an
            image folder, tar shards, a LitData dataset).
        cache_dir: where files are kept (default: :func:`default_cache_dir`);
            a URL (``s3://bucket/prefix``): the files are kept in the default
            folder and shared there (see
            :mod:`slipstream.format.shared_copy`): a file found at the URL is
            downloaded instead of built, and a file built is uploaded.
        name, version: identify a source that cannot identify itself.
        remote: object-store options, for a source or ``cache_dir`` at a URL.
        write_mode: how the images of the fields (``fields``, or the
            source's own) are stored: every
            :class:`~slipstream.RGBImageField`'s ``write_mode`` (``"jpeg"``,
            ``"yuv420"``, ``"raw"`` or ``"smart"``); None: as the fields say.

    Raises:
        CacheFolderError: the cache folder is a file, or a symbolic link to
            nothing (the message names it and ``SLIPSTREAM_CACHE_DIR``).
    """
    return build(cache_entry(source, fields, cache_dir, name=name, version=version, page_size=page_size,
                             remote=remote, write_mode=write_mode), workers=workers, verbose=verbose)


LOADER_KEYWORDS = tuple(name for name in inspect.signature(cached).parameters
                        if name not in ("source", "cache_dir", "verbose", "remote"))
"""The arguments of :func:`cached` that :class:`slipstream.Loader` takes
for the file of a source (``fields``, ``write_mode``...): all of them but
the source and those the loader has of its own."""


def build(entry: CacheEntry, *, workers: int | None = None, verbose: bool = True) -> Path:
    """The file of a cache entry, written by :func:`write` unless it exists
    (or another process is writing it: then once that one is done); with a
    shared copy, downloaded from there when it is there, else uploaded
    there (see :func:`share`)."""
    if entry.path.exists() and entry.shared is None:
        cache_use.used(entry)
        return entry.path
    with entry.lock():  # waits while another process builds it
        if not entry.path.exists():
            if entry.shared is not None and entry.shared.exists():
                entry.shared.download(entry.path)
                cache_use.used(entry)
                return entry.path
            cache_use.announce(entry, "written now")
            write(entry.path, entry.source, entry.fields, workers=workers, page_size=entry.page_size,
                  verbose=verbose)
        share(entry)
    cache_use.used(entry)
    return entry.path


def share(entry: CacheEntry) -> None:
    """Upload the entry's file to its shared copy, if it has one and the
    copy is not there yet.  A failed upload is a :class:`CacheWarning`:
    the local file serves, and the next use tries again."""
    shared = entry.shared
    if shared is None:
        return
    try:
        if not shared.exists():
            shared.upload(entry.path)
    except Exception as exc:
        warnings.warn(f"{entry.path} was not shared at {shared.url} ({type(exc).__name__}: {exc}): the local file "
                      f"serves, and the next use of it tries again", CacheWarning, stacklevel=3)


@dataclasses.dataclass(frozen=True)
class CacheEntry:
    """Where :func:`cached` keeps the dataset file of a source, and what it writes there.

    Attributes:
        path: the dataset file (it may not exist yet).
        source: the source object (a path already read as the source it holds).
        samples, fields, user_metadata: the source as :func:`write` reads it
            (:func:`~slipstream.sources.as_source`).
        page_size: bytes per data page of the file.
        shared: the copy of the file that machines share, at a URL
            (``cache_dir`` given as one), or None.
        identity: what identifies the source's content
            (:func:`~slipstream.sources.identity.source_identity`).
        location: what of it stays when the content changes
            (:func:`~slipstream.sources.identity.source_location`), or None.
        lineage: a hash of the location and the fields, shared by the
            copies of one source made for these fields (None: no location).
        identified: when the identity was taken (Unix time).
    """

    path: Path
    source: Any
    samples: Any
    fields: dict[str, Any]
    user_metadata: dict[str, Any]
    page_size: int
    shared: SharedCopy | None = None
    identity: dict[str, Any] | None = None
    location: dict[str, Any] | None = None
    lineage: str | None = None
    identified: float = 0.0

    @contextlib.contextmanager
    def lock(self, wait: bool = True, streaming: bool = False) -> Iterator[bool]:
        """Hold the lock under which one process builds the file: yields
        True once held; without ``wait``, False at once when another
        process holds it.  ``streaming``: the holder is a loader's first
        epoch, which writes the file only as its user iterates it.

        Raises:
            ArgumentError: ``wait`` for a file a loader of this process
                writes as it streams (waiting would never end: that loader
                goes on only when this thread iterates it).
        """
        path = cache_files.lock_path(self.path)
        key = os.path.realpath(path)
        if key in _STREAMING_LOCKS:
            if wait:
                raise ArgumentError(f"{self.path} is being written by a Loader of this process, still in its first "
                                    f"epoch over the same source: finish that loader's epoch 0, or close() it, before "
                                    f"opening another Loader or calling cached() over this source")
            yield False
            return
        fd = lock_removable(path, wait=wait)
        if fd is None:
            yield False
            return
        if streaming:
            _STREAMING_LOCKS.add(key)
        try:
            yield True
        finally:
            if streaming:
                _STREAMING_LOCKS.discard(key)
            unlock_removable(path, fd)  # the file is there, or the next builder starts over: no lock left


class UnidentifiedSource(ArgumentError):
    """A source that cannot identify itself, given to the cache without a name."""


# The cache locks this process holds for loaders in their first epoch (see
# CacheEntry.lock): flock does not tell a process it holds a lock already.
_STREAMING_LOCKS: set[str] = set()


def cache_entry(source: Any, fields: Mapping[str, Any] | None = None, cache_dir: str | os.PathLike | None = None,
                *, name: str | None = None, version: str | int | None = None,
                page_size: int = layout.DEFAULT_PAGE_SIZE, remote: Remote | None = None,
                write_mode: str | None = None, create: bool = True) -> CacheEntry:
    """The :class:`CacheEntry` of ``source`` (arguments as for :func:`cached`);
    the cache folder is created, unless ``create`` is False (to say where
    the file is or would be).

    Raises:
        CacheFolderError: the cache folder cannot be created (see
            :func:`slipstream.cache.made_folder`).
    """
    source = source_at(source, remote) if isinstance(source, (str, os.PathLike)) else source
    identified_at = time.time()
    adapted = adapt(source, fields)
    samples, fields, meta = writer_input(adapted, fields)
    fields = _with_write_mode(fields, write_mode)
    # the object's own identity first (every cache key so far); else what its Source says, as a registered
    # adapter of a type of one's own knows
    identified = source_identity(source) or identity_of(adapted)
    if identified is None and name is None:
        raise UnidentifiedSource(f"cached() cannot tell what a {type(source).__name__} holds: pass name= (and "
                                 f"version= when its content changes); folders, tar shards, LitData and Hugging Face "
                                 f"datasets are identified by their content")
    identity, stem = identified or ({"name": name, "version": version}, name)
    described = [[n, f.type_id, type(f).__qualname__, f.arguments()] for n, f in fields.items()]
    spec = {"source": identity, "format": layout.VERSION, "page_size": page_size, "fields": described}
    location = source_location(identity)
    lineage = None if location is None else _digest({**spec, "source": location})
    shared_at = str(cache_dir) if is_url(cache_dir) else None
    directory = Path(cache_dir) if cache_dir is not None and shared_at is None else default_cache_dir()
    if create:
        made_folder(directory, None if cache_dir is None or shared_at is not None else f"cache_dir={cache_dir}")
    path = directory / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', stem)[:64]}-{_digest(spec)}.slip"
    shared = None if shared_at is None else SharedCopy(shared_at, path.name, remote)
    return CacheEntry(path, source, samples, fields, meta, page_size, shared, identity, location, lineage,
                      identified_at)


def _digest(spec: dict[str, Any]) -> str:
    """The hash that names a cached file (of its spec) or its lineage."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:cache_files.DIGEST_CHARS]


def _with_write_mode(fields: dict[str, Any], write_mode: str | None) -> dict[str, Any]:
    """``fields``, each :class:`RGBImageField` storing its images as
    ``write_mode`` says (None: as they are).

    Raises:
        ArgumentError: ``write_mode`` is not a mode, or no field is an image.
    """
    if write_mode is None:
        return fields
    if not any(isinstance(field, RGBImageField) for field in fields.values()):
        raise ArgumentError(f"write_mode={write_mode!r} says how images are stored, but the fields "
                            f"{list(fields)} have no RGBImageField")
    return {name: dataclasses.replace(field, write_mode=write_mode) if isinstance(field, RGBImageField) else field
            for name, field in fields.items()}


def check_tiles(write_mode: str | None, tile_width: int | None) -> None:
    """Refuse tiles (``tile_width``) together with a ``write_mode`` that
    stores no JPEGs to tile: planes (``"yuv420"``) or raw pixels; shared
    by :func:`convert` and ``slipstream write``.

    Raises:
        ArgumentError: both are given.
    """
    if tile_width is not None and write_mode in ("yuv420", "raw"):
        stored = "planes" if write_mode == "yuv420" else "raw pixels"
        raise ArgumentError(f'tile_width tiles stored JPEGs, and write_mode="{write_mode}" stores {stored} instead: '
                            f'give one of them')


class _StoredValue:
    """A field as a file describes it, for copying: its values arrive
    already :class:`Encoded`, and image values may be re-stored (tiled, or
    as planes)."""

    def __init__(self, descriptor: Any, tile_width: int | None = None, write_mode: str | None = None) -> None:
        self.type_id, self._arguments, self._record = descriptor.type_id, descriptor.arguments, descriptor.record_dtype
        image = self.type_id == RGBImageField.type_id
        self.tile_width = tile_width if image else None
        self.planes = image and write_mode == "yuv420"
        if self.tile_width is not None:
            self._arguments = {**self._arguments, "tile_width": tile_width}
        if self.planes:
            self._arguments = {**self._arguments, "write_mode": write_mode, "tile_width": None}

    def arguments(self) -> dict[str, Any]:
        return self._arguments

    def record_dtype(self) -> Any:
        return self._record

    def encode(self, value: Encoded) -> Encoded:
        if value.data is None or not (self.planes or self.tile_width is not None):
            return value
        mode = value.record["mode"]
        if self.planes and mode != YUV420_MODE:
            record = value.record.copy()
            record["mode"] = YUV420_MODE
            if mode == RAW_MODE:
                pixels = np.frombuffer(value.data, np.uint8).reshape(int(record["height"]), int(record["width"]), 3)
                return Encoded(record, native.rgb_to_planes(pixels).tobytes())
            # Planes of another size than the record's would make the whole file unopenable.
            check_stored_size(int(record["height"]), int(record["width"]), value.data)
            return Encoded(record, native.jpeg_decode_planes(value.data).tobytes())
        if self.tile_width is None or mode != JPEG_MODE:
            return value
        return Encoded(value.record, tiled_jpeg(value.data, self.tile_width))


class _StoredSamples:
    """The samples of a reader as their stored records and bytes."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader

    def __len__(self) -> int:
        return len(self.reader)

    def __getitem__(self, index: int) -> tuple[Any, ...]:
        record = self.reader.metadata[index]
        values = []
        for name in self.reader.fields:
            sub = record[name]
            kept = stored_record(sub)
            data = self.reader.value_bytes(index, name)
            values.append(Encoded(kept, None if data is None else bytes(data)))
        return tuple(values)

    def describe(self, index: int) -> str:
        return f"sample {index} of {self.reader.path}"


def convert(src: str | os.PathLike, dst: str | os.PathLike, *, tile_width: int | None = None,
            write_mode: str | None = None, page_size: int = layout.DEFAULT_PAGE_SIZE, page_checksums: bool = True,
            verbose: bool = True, shard_size: int | str | None = None, shards: int | None = None,
            remote: Remote | None = None, overwrite: bool = False) -> WriteResult:
    """Copy a dataset (a slipstream file, a sharded dataset, a URL of
    either, or an FFCV ``.beton``) into a slipstream file or a sharded
    dataset at ``dst``.  Stored values are copied as they are (images are
    not decoded or re-encoded) unless ``tile_width`` or ``write_mode`` asks
    for another layout of the images.

    Args:
        tile_width: when set, the stored JPEGs of image fields are re-coded
            losslessly into tiles at most this many pixels wide, as
            :class:`~slipstream.RGBImageField`'s ``tile_width`` does: the
            same pixels, faster crops.
        write_mode: ``"yuv420"`` stores the images as planar YCbCr 4:2:0
            planes, as :class:`~slipstream.RGBImageField`'s ``write_mode``
            does (JPEGs decoded to their planes, raw pixels converted);
            None copies them as they are.
        page_size, page_checksums, verbose, shard_size, shards, remote,
            overwrite: as for :func:`write` (``remote`` serves ``src`` and
            ``dst``).
    """
    if tile_width is not None and not (isinstance(tile_width, int) and tile_width > 0):
        raise ArgumentError(f"tile_width must be a positive integer or None, got {tile_width!r}")
    if write_mode not in (None, "yuv420"):
        raise ArgumentError(f'write_mode must be None (values copied as they are) or "yuv420", got {write_mode!r}')
    check_tiles(write_mode, tile_width)
    with open_dataset(src, remote=remote) as reader:
        fields = {d.name: _StoredValue(d, tile_width, write_mode) for d in reader.descriptors}
        return write_dataset(dst, _StoredSamples(reader), fields, workers=0, page_size=page_size,
                             page_checksums=page_checksums, user_metadata=reader.user_metadata, verbose=verbose,
                             shard_size=shard_size, shards=shards, remote=remote, overwrite=overwrite)
