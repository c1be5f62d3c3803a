"""Exceptions raised by slipstream.

Every error slipstream raises on purpose is a :class:`SlipstreamError`.  The
subclasses also derive from the matching built-in exception, so code that
already catches ``ValueError``, ``OSError`` or ``MemoryError`` keeps working.
"""

from __future__ import annotations


class SlipstreamError(Exception):
    """Base class of every slipstream error.

    Attributes:
        status: the C status code (a :class:`slipstream.native.Status`) when the
            error comes from the native library, else ``None``.
        detail: the native library's explanation (``slip_last_error``), or ``""``.
    """

    def __init__(self, message: str, *, status: int | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


class LibraryError(SlipstreamError, ImportError):
    """The native library is missing, cannot be loaded, or does not match the bindings."""


class ArgumentError(SlipstreamError, ValueError):
    """An argument has the wrong type, dtype, shape, size or value."""


class DecodeError(SlipstreamError, ValueError):
    """Compressed image data is not a JPEG, is corrupt, truncated, too large or unsupported."""


class EncodeError(SlipstreamError, ValueError):
    """An image could not be compressed."""


class NativeMemoryError(SlipstreamError, MemoryError):
    """The native library could not allocate its scratch memory."""


class NativeIOError(SlipstreamError, OSError):
    """A native file read failed or hit the end of the file early."""


class PipelineError(SlipstreamError, ValueError):
    """A pipeline is malformed: operations whose shapes do not chain, a
    reference to a missing pipeline, an operation in the wrong place."""


class OperationError(PipelineError):
    """An operation's compiled code raised an exception on a sample (or, for
    a batch operation, on a batch); the message names the operation, its
    pipeline and the sample's index in the dataset, and the operation's own
    exception is the ``__cause__``."""


class CompileError(SlipstreamError):
    """Numba could not compile a generated stage; the message names the
    operation and the generated line that called it."""


class FormatError(SlipstreamError, ValueError):
    """A dataset file is not one slipstream can read: wrong magic, unsupported
    version, truncated, or a table whose checksum or bounds are wrong.  The
    message names the file and what is wrong."""


class DatasetNotFoundError(SlipstreamError, FileNotFoundError):
    """A dataset file, source folder, object or bucket does not exist."""


class StorageError(SlipstreamError, OSError):
    """Object storage refused a request (wrong credentials, no permission)
    or a request still failed after its retries (the store is unreachable).
    The message names the URL."""


class SampleIndexError(SlipstreamError, IndexError):
    """A sample index outside the dataset."""


class SampleWarning(UserWarning):
    """Samples that could not be decoded were left out of their batches or
    replaced by zeros (``Loader(on_error="skip" | "replace")``); the message
    counts them and names the first ones."""


class CacheWarning(UserWarning):
    """A cache did not keep what it should have, and the loader went on
    without it.  A page read back from the node-local page cache failed its
    checksum (the copy on the cache's disk was damaged, not the object in
    the store): it was removed from the cache and downloaded again; the
    message names the page file, the shard and its URL.  Or a source's
    dataset file could not be written during a loader's first epoch (a
    full disk): training goes on from the source; the message names the
    file and the error.  Or the compile cache could not keep a compiled
    function or a generated stage (a full disk, a read-only folder): it
    runs, compiled again by each process; the message names the folder,
    once per process.  Or a first epoch's file is kept out of the dataset
    cache, because a sample could not be read (see
    :mod:`slipstream.loader.first_epoch`)."""


class LossWarning(UserWarning):
    """A write stored some values other than they were given, as their
    field's settings allow but a user may not expect: with
    ``RGBImageField(write_mode="yuv420")``, images that are not 4:2:0 JPEGs
    (4:4:4 ones, PNGs, arrays) keep their colour at half resolution only.
    One warning per write and field counts them, names the first samples
    and says how to store them without the loss."""


class SourceWarning(UserWarning):
    """A source leaves out files it holds: images directly in the root of a
    folder of class folders (which torchvision's ``ImageFolder`` leaves out
    too), tar members whose extension no field reads.  The message counts
    them, names the first ones and says how to read them."""


class FieldValueError(SlipstreamError, ValueError):
    """A value given to a field while writing has the wrong type, dtype or
    shape, or a source image cannot be read; the message names the sample
    (and its source path when there is one) and the field."""


__all__ = [
    "SlipstreamError",
    "LibraryError",
    "ArgumentError",
    "DecodeError",
    "EncodeError",
    "NativeMemoryError",
    "NativeIOError",
    "PipelineError",
    "CompileError",
    "FormatError",
    "DatasetNotFoundError",
    "SampleIndexError",
    "FieldValueError",
    "SampleWarning",
    "CacheWarning",
    "LossWarning",
    "SourceWarning",
]
