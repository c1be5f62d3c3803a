"""Field decoders: the first operation of a loader's pipeline, reading one
field of one sample out of the dataset file into pipeline memory.

Decoders read from a :class:`DecodeSource`: the dataset's bytes as a uint8
array (a page store's ``storage``: the mapped file, or an address range
whose pages are mapped or read into place ahead of each batch) and, per
field, each sample's offset into that array: its offset in the dataset's
tables, since every store keeps each page at its own place.  The decoders
never know which store is in use.

A failing sample must not raise (an exception would stop the whole batch),
so decoders that can fail (``can_fail``, see
:class:`~slipstream.compiler.Decoder`) write each sample's native status into
their status output (0 when it decoded) and fill a failed sample's output
with zeros (a black image), so that nothing half-decoded flows into the rest
of the pipeline.  A sample known to have failed before the batch (the
dataset holds no values for it, or its bytes lie in a page that failed its
checksum) has a non-zero known status, an input of each call of the
compiled stage as the batch's indices are (the loader works it out before
the batch; a decoder lists :attr:`DecodeSource.known` among its inputs
where its code takes the sample's status): it is not decoded at all, its
status is the known one and its output zeros.  After the batch the loader
applies its ``on_error`` policy to the samples that the known statuses or
the decoders' statuses say failed: raise naming the sample, leave the sample
out of its batch, or keep the zero-filled sample.  The image decoders share
that logic, and the choice between raw stored pixels and a JPEG, through
:func:`sample_decoder`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from numba import njit, uint64

from slipstream import native
from slipstream.compiler import Allocation, Decoder, Geometry, Kind, Operation, State, symbols
from slipstream.errors import ArgumentError
from slipstream.fields import geometry
from slipstream.fields.image_modes import RAW_MODE, YUV420_MODE

UNREADABLE = int(native.Status.ECORRUPT)
"""The status of a sample the dataset holds no values for (its writer could
not read or encode it): decoders leave it alone, as a sample whose bytes are
corrupt, and the loader's ``on_error`` applies."""

SIZE_KEYS = ("height", "width")
"""Record items that decoders compute a sample's geometry from before they
see its status: an unreadable sample (whose records are zeros) reads 1 in
their columns, a 1x1 image, so that the geometry is defined (no division by
a zero size) and its decode is skipped as for any failed sample."""

COUNT_DECODES_VARIABLE = "SLIPSTREAM_COUNT_DECODES"
"""Environment variable that, set to anything but ``""`` or ``"0"`` when a
:class:`DecodeSource` is made, turns on its count of JPEG decode calls."""


class IncompleteTables(ArgumentError):
    """A decoder needs a fact of the whole dataset (every image's size, the
    longest value) before every sample has been read."""


class DecodeSource:
    """Where decoders find the bytes of samples (see the module docstring).

    Every per-sample array a compiled stage reads from the records (the
    offsets and sizes of stored values, image heights, widths and modes,
    lengths, scalar values) is one of the source's :meth:`column` arrays,
    made once and shared by every decoder that reads it.

    The columns have one writer, :meth:`refresh`, and a version that counts
    its calls.  The protocol, for records that change after the pipeline
    was compiled (the samples of a first epoch, arriving as it runs): a
    stager reports the samples whose records arrived
    (:class:`slipstream.loader.stager.Staged`); the epoch iterator, between
    two calls of the compiled pipeline, calls :meth:`refresh` with them and
    passes the version it returns to the next call, which binds the
    decoders' inputs again when its version differs from theirs
    (:meth:`slipstream.compiler.CompiledPipeline.bind_inputs`).  Nothing
    else writes a column, and no column is written while a call runs.

    Whether a sample is known to have failed before a batch is no part of
    the source: the loader works it out per batch and hands it to the
    compiled pipeline with the batch (see the module docstring).

    Attributes:
        reader: the dataset's reader (metadata, fields, path).
        storage: uint8 array the offsets index.
        known: what a decoder lists among its inputs, in place of an
            array, where its code takes the sample's known failure status
            (:data:`slipstream.compiler.symbols.KNOWN`): an int32, 0 when
            no failure is known.
        version: the columns' version: the number of :meth:`refresh` calls
            so far.
        count_decodes: whether the image decoders count their native JPEG
            decode calls in ``decodes``: a debugging switch (does a
            multi-crop decode each image once?), off by default, set by
            the argument of the same name or else by
            ``$SLIPSTREAM_COUNT_DECODES``.  When it is off the compiled
            decoders hold no counting code at all.
        samples: the per-sample arrays' length: ``len(reader)``, or for
            the tables of a stream whose length is not known yet, the
            indices its samples can arrive at (``reader.capacity``).
        decodes: int64 per sample: native JPEG decode calls made
            for it while ``count_decodes`` is on, zeros otherwise (each
            sample is written by one thread, so no races).
    """

    known: ClassVar[symbols.Symbol] = symbols.KNOWN

    def __init__(self, reader: Any, storage: np.ndarray, count_decodes: bool | None = None,
                 samples: int | None = None) -> None:
        self.reader = reader
        self.storage = storage
        # np.zeros leaves large arrays untouched (no memory) until written: a stream's capacity costs nothing.
        self.samples = len(reader) if samples is None else samples
        self.version = 0
        if count_decodes is None:
            count_decodes = os.environ.get(COUNT_DECODES_VARIABLE, "") not in ("", "0")
        self.count_decodes = bool(count_decodes)
        # Allocated even when not counting: decoders written elsewhere take it as an input (see image_inputs).
        self.decodes = np.zeros(self.samples, np.int64)
        self._columns: dict[tuple[str, str], np.ndarray] = {}
        self._reach: dict[str, set[int]] = {}

    def column(self, field: str, key: str, dtype: Any = None) -> np.ndarray:
        """Per sample, item ``key`` of ``field``'s records, as a contiguous
        array (of ``dtype``, else the records'); the same array for every
        caller.  Asking for another dtype than the first caller's is an error."""
        records = self.reader.metadata[field][key]
        made = self._columns.get((field, key))
        if made is None:
            made = self._columns[(field, key)] = np.zeros((self.samples, *records.shape[1:]), dtype or records.dtype)
            known = min(len(records), self.samples)
            made[:known] = records[:known]
            if key in SIZE_KEYS:
                made[list(self.reader.unreadable)] = 1  # the samples the reader names (not a scan of every sample)
        elif dtype is not None and made.dtype != np.dtype(dtype):
            raise TypeError(f"column {key!r} of field {field!r} is {made.dtype}, asked for {np.dtype(dtype)}")
        return made

    def records(self, field: str, need: str) -> np.ndarray:
        """Every sample's records of ``field``, for a decoder that needs a
        fact of the whole dataset (``need``, in words) when it is built;
        the samples the dataset holds no values for are left out.

        Raises:
            IncompleteTables: the dataset's samples are still arriving (a
                first epoch over a source), so the fact is not known yet.
        """
        if not self.reader.complete:
            raise IncompleteTables(f"{self.reader.path}: {need} is not known until every sample has been read")
        records = self.reader.metadata[field]
        return np.delete(records, sorted(self.reader.unreadable)) if self.reader.unreadable else records

    def refresh(self, indices: np.ndarray) -> int:
        """Copy the records of samples ``indices`` into every column made
        (records that arrived after the pipeline was compiled), and return
        the columns' new :attr:`version`, which the next call of the
        compiled pipeline is given (see the class docstring).  A sample the
        dataset holds no values for reads 1 in the size columns, as at
        :meth:`column`."""
        unreadable = [index for index in indices.tolist() if index in self.reader.unreadable]
        for (field, key), column in self._columns.items():
            column[indices] = self.reader.metadata[field][key][indices]
            if key in SIZE_KEYS:
                column[unreadable] = 1
        self.version += 1
        return self.version

    def offsets(self, field: str) -> np.ndarray:
        """Per sample, the start of the field's bytes in ``storage`` (uint64)."""
        return self.column(field, "offset", np.uint64)

    def sizes(self, field: str) -> np.ndarray:
        """Per sample, the length of the field's bytes (uint64)."""
        return self.column(field, "size", np.uint64)

    def image_inputs(self, field: str) -> tuple[Any, ...]:
        """What an image decoder reads, in this order: storage, offsets,
        sizes, heights, widths, modes, the sample's known failure status
        (:attr:`known`), decodes."""
        return (self.storage, self.offsets(field), self.sizes(field), self.column(field, "height", np.int64),
                self.column(field, "width", np.int64), self.column(field, "mode"), self.known, self.decodes)

    def read_also(self, field: str, steps: Any) -> None:
        """Declare that a decoder reads, besides each sample's own value of
        ``field``, the values of the samples ``steps`` indices after it (a
        window of frames): stagers bring their pages in before the batch too
        (:meth:`reached`)."""
        self._reach.setdefault(field, {0}).update(int(step) for step in steps)

    def reached(self, field: str, indices: np.ndarray) -> np.ndarray:
        """The samples whose values of ``field`` the decoders read for the
        samples ``indices``: a (len(indices), k) array, row i for
        ``indices[i]`` (its own first), those past the last sample left out
        by repeating the last (their decode fails on its own)."""
        steps = np.array(sorted(self._reach.get(field, {0})), np.int64)
        return np.minimum(np.asarray(indices, np.int64)[:, None] + steps[None, :], self.samples - 1)

    @property
    def offset_fields(self) -> list[str]:
        """Fields whose values live in data pages: those whose pages a stager brings in before a batch."""
        return [field for field, key in self._columns if key == "offset"]


@dataclasses.dataclass(frozen=True, eq=False)
class NDArrayDecoder(Decoder):
    """Copies an ``NDArrayField`` value into a (dtype, shape) sample."""

    source: DecodeSource = dataclasses.field(repr=False)
    field: str
    dtype: Any
    shape: tuple[int, ...]

    def stored_field(self) -> str:
        """The field it decodes."""
        return self.field

    def inputs(self) -> tuple[np.ndarray, ...]:
        return (self.source.storage, self.source.offsets(self.field))

    def declare(self, state: State | None) -> tuple[State, Allocation]:
        return State(shape=self.shape, dtype=self.dtype), Allocation(self.shape, self.dtype)

    def generate_code(self):
        nbytes = uint64(np.dtype(self.dtype).itemsize * int(np.prod(self.shape, dtype=np.int64)))

        def read(storage, offsets, index, out, key):
            start = uint64(offsets[index])
            dst = out.reshape(-1).view(np.uint8)
            for j in range(nbytes):
                dst[j] = storage[start + j]
            return out

        return read

    def fingerprint(self) -> str:
        return f"NDArrayDecoder:{np.dtype(self.dtype).str}:{self.shape}"


SampleDecode = Callable[..., int]
"""A compiled ``(data, out, args) -> status`` that makes one sample's output
``out`` from its stored bytes ``data``, with ``args`` the per-sample values
it needs (a tuple), and returns a native status (0 on success)."""


def sample_decoder(from_pixels: SampleDecode, from_jpeg: SampleDecode, from_planes: SampleDecode,
                   count_decodes: bool = False) -> Callable[..., Any]:
    """The per-sample body every image decoder shares: a compiled
    ``decode_sample(storage, offsets, sizes, modes, known, decodes, index, out, status, args) -> out``.

    It takes the sample's stored bytes and hands them by the record's mode
    (:mod:`~slipstream.fields.image_modes`): to ``from_pixels`` for
    ``RAW_MODE`` (height x width x 3 pixels), to ``from_planes`` for
    ``YUV420_MODE`` (planar YCbCr 4:2:0) and to ``from_jpeg`` otherwise,
    and writes the outcome into ``status[0]`` (the decoder's status
    output).  A sample whose ``known`` status (its known failure, see
    :attr:`DecodeSource.known`) is not 0 is not decoded; a failure,
    known or new, leaves its status in ``status[0]`` and zeros in ``out``
    (see the module docstring).  With ``count_decodes``,
    ``decodes[index]`` goes up by one per call of ``from_jpeg``, which
    must therefore make exactly one native JPEG decode call; without it
    the compiled code has no counting (the flag is a constant that Numba
    folds away).

    The four functions are inlined into the decoder that calls
    ``decode_sample`` (Numba's ``inline="always"``, which the three given
    functions should have too): each would otherwise be a compilation of
    its own, nearly doubling a cold compile of the decoder.
    """

    @njit(nogil=True, inline="always")
    def decode_sample(storage, offsets, sizes, modes, known, decodes, index, out, status, args):
        start, size = uint64(offsets[index]), uint64(sizes[index])
        data = storage[start:start + size]
        if known != 0:  # no values, or its bytes are known to be corrupt
            outcome = np.int32(known)
        elif modes[index] == RAW_MODE:
            outcome = np.int32(from_pixels(data, out, args))
        elif modes[index] == YUV420_MODE:
            outcome = np.int32(from_planes(data, out, args))
        else:
            outcome = np.int32(from_jpeg(data, out, args))
            if count_decodes:
                decodes[index] += 1
        status[0] = outcome  # on every sample: the buffer holds an earlier batch's otherwise
        if outcome != 0:
            out[:] = 0
        return out

    return decode_sample


class ImageFieldDecoder(Decoder):
    """Base of the decoders of an ``RGBImageField``: they read
    :meth:`DecodeSource.image_inputs` and give (height, width, 3) uint8
    samples of ``self.size``.  Subclasses have ``source``, ``field`` and
    ``size`` (a field or a property), and build their per-sample code on
    :meth:`sample_decoder`.  They can fail: their code takes the status
    output after their own outs (see :class:`~slipstream.compiler.Decoder`)."""

    source: DecodeSource
    field: str
    size: tuple[int, int]
    can_fail: ClassVar[bool] = True

    def stored_field(self) -> str:
        """The field it decodes."""
        return self.field

    def inputs(self) -> tuple[np.ndarray, ...]:
        return self.source.image_inputs(self.field)

    def declare(self, state: State | None) -> tuple[State, Allocation]:
        shape = (*self.size, 3)
        return State(shape=shape, dtype=np.uint8), Allocation(shape, np.uint8)

    def sample_decoder(self, from_pixels: SampleDecode, from_jpeg: SampleDecode,
                       from_planes: SampleDecode) -> Callable[..., Any]:
        """:func:`sample_decoder` over these three functions, counting decode
        calls when the source does (``DecodeSource.count_decodes``)."""
        return sample_decoder(from_pixels, from_jpeg, from_planes, self.source.count_decodes)

    def fingerprint(self) -> str:
        """The class and ``repr`` (see :meth:`Operation.fingerprint`), and
        whether decode calls are counted, which changes the compiled code."""
        return f"{super().fingerprint()}:count_decodes={self.source.count_decodes}"


class GeometricImageDecoder(ImageFieldDecoder):
    """An image decoder that also gives, as its output ``transform``, where
    each stored pixel lands in the decoded sample (see
    :mod:`slipstream.fields.geometry`): its code takes the transform's
    per-sample array after the image's."""

    geometry: ClassVar[Geometry] = Geometry.MAPPED

    def declare(self, state: State | None) -> tuple[State, list[Allocation]]:
        image, memory = super().declare(state)
        return image, [memory, Allocation((geometry.SIZE,), np.float64, name=geometry.TRANSFORM)]


@dataclasses.dataclass(frozen=True, eq=False)
class ImageDecoder(GeometricImageDecoder):
    """Decodes an ``RGBImageField`` whose images all have one size into
    (height, width, 3) uint8 samples, JPEG or raw; its ``transform`` is the
    identity."""

    source: DecodeSource = dataclasses.field(repr=False)
    field: str

    def __post_init__(self) -> None:
        records = self.source.records(self.field, "the size every image shares")
        sizes = set(zip(records["height"].tolist(), records["width"].tolist()))
        if len(sizes) > 1:
            some = ", ".join(f"{h}x{w}" for h, w in sorted(sizes)[:4])
            raise ArgumentError(
                f"{self.source.reader.path}: the images of field {self.field!r} have {len(sizes)} different sizes "
                f"({some}, ...); a batch needs one size: give this field a pipeline that starts with a crop "
                f"(RandomResizedCrop, CenterCrop) instead of the plain image decoder")

    @property
    def size(self) -> tuple[int, int]:
        records = self.source.records(self.field, "the size every image shares")
        return (int(records["height"][0]), int(records["width"][0])) if len(records) else (0, 0)

    def generate_code(self):
        decode_sample = self.sample_decoder(_copy_pixels, _decode_whole_jpeg, _convert_whole_planes)
        set_region = geometry.set_region

        def decode(storage, offsets, sizes, heights, widths, modes, known, decodes, index, out, transform, status,
                   key):
            height, width = heights[index], widths[index]
            set_region(transform, 0, 0, height, width, height, width, False)
            return decode_sample(storage, offsets, sizes, modes, known, decodes, index, out, status, ())

        return decode


@njit(nogil=True, inline="always")
def _copy_pixels(data, out, args):
    """Raw stored pixels of the output's size, copied as they are."""
    flat = out.reshape(-1)
    for j in range(uint64(flat.size)):
        flat[j] = data[j]
    return 0


@njit(nogil=True, inline="always")
def _decode_whole_jpeg(data, out, args):
    """A JPEG of the output's size, decoded whole at full scale."""
    return native.slip_jpeg_decode(data, uint64(data.size), 0, 0, out.shape[0], out.shape[1], 1, 0, out, out.size,
                                   out.strides[0])


_BILINEAR = int(native.Interp.BILINEAR)


@njit(nogil=True, inline="always")
def _convert_whole_planes(data, out, args):
    """The planes of an image of the output's size, converted whole (chroma interpolated linearly)."""
    height, width = out.shape[0], out.shape[1]
    return native.slip_planes_crop_resize(data, uint64(data.size), height, width, 0, 0, height, width, height, width,
                                          0, _BILINEAR, out, out.size, out.strides[0])


@dataclasses.dataclass(frozen=True, eq=False)
class SampleIndex(Decoder):
    """The sample's dataset index, for fields decoded in Python later."""

    def declare(self, state: State | None) -> tuple[State, Allocation]:
        return State(shape=(), dtype=np.int64), Allocation((), np.int64)

    def generate_code(self):
        def read(index, out, key):
            out[0] = index
            return out

        return read


@dataclasses.dataclass(frozen=True, eq=False)
class ReadValues(Operation):
    """Turns a batch of sample indices into a list of the field's Python
    values (bytes, JSON objects), read through the reader."""

    reader: Any = dataclasses.field(repr=False)
    field: str
    kind: ClassVar[Kind] = Kind.TORCH

    def declare(self, state: State) -> tuple[State, None]:
        return State(shape=(), dtype=np.dtype(object)), None

    def generate_code(self):
        reader, field = self.reader, self.field

        def read_values(indices: Any) -> list[Any]:
            return [reader.read(i, field) for i in indices.tolist()]

        return read_values

    def fingerprint(self) -> str:
        return f"ReadValues:{self.field}"


@dataclasses.dataclass(frozen=True, eq=False)
class StoredBytesDecoder(Decoder):
    """A field's stored bytes, undecoded, at the start of a (max_size,)
    uint8 sample (the rest is left as it was): what reading alone costs, or
    compressed images for a decoder elsewhere (e.g. on the GPU).  Pair it
    with the field's ``size`` column for each value's length.  Values longer
    than ``max_size`` fail (status ``EBUFFER``) and come out as zeros."""

    source: DecodeSource = dataclasses.field(repr=False)
    field: str
    max_size: int
    can_fail: ClassVar[bool] = True

    def stored_field(self) -> str:
        """The field it decodes."""
        return self.field

    def inputs(self) -> tuple[Any, ...]:
        return (self.source.storage, self.source.offsets(self.field), self.source.sizes(self.field),
                self.source.known)

    def declare(self, state: State | None) -> tuple[State, Allocation]:
        shape = (int(self.max_size),)
        return State(shape=shape, dtype=np.uint8), Allocation(shape, np.uint8)

    def generate_code(self):
        too_long = np.int32(native.Status.EBUFFER)

        def read(storage, offsets, sizes, known, index, out, status, key):
            start, size = uint64(offsets[index]), uint64(sizes[index])
            status[0] = known  # no values, or its bytes are known to be corrupt
            if status[0] == 0 and size > uint64(out.size):
                status[0] = too_long
            if status[0] != 0:
                out[:] = 0
                return out
            for j in range(size):
                out[j] = storage[start + j]
            return out

        return read

    def fingerprint(self) -> str:
        return "StoredBytesDecoder"
