"""slipstream: fast data loading for PyTorch vision training.

Datasets are converted once into a page-based file; a pipeline of operations
(decode, crop, flip, normalize, ...) is compiled into fused, GIL-free
machine code per stage, run on several threads at once, with the pixel work done by C kernels on
libjpeg-turbo.

The layers, each usable on its own: :mod:`slipstream.native` (the C kernels,
from Python and from Numba), :mod:`slipstream.compiler` (pipelines of
operations compiled into one multithreaded function per stage, usable on in-memory
arrays), :mod:`slipstream.format` (the dataset file: :func:`write`,
:func:`cached`, :func:`open_dataset`, :class:`Reader`), :mod:`slipstream.fields` (what a file
stores per sample) and :mod:`slipstream.ops` (the operations).
"""

from slipstream import _threading

_threading.configure()

from slipstream import native  # noqa: E402
from slipstream import fields  # noqa: E402  (registers the field types before any file is read)
from slipstream import ops  # noqa: E402
from slipstream.convert import cached, convert, write  # noqa: E402
from slipstream import cache  # noqa: E402  (ss.cache.list(), ss.cache.prune(): the dataset cache)
from slipstream.fields import (  # noqa: E402
    BytesField,
    FloatField,
    InstanceMasksField,
    IntField,
    JSONField,
    NDArrayField,
    RaggedField,
    RGBImageField,
    SegmentationMaskField,
    VideoClip,
    VideoField,
)
from slipstream.format import Reader, open_dataset  # noqa: E402
from slipstream.format.location import register_location_scheme  # noqa: E402
from slipstream.format.remote import Remote  # noqa: E402
from slipstream.compiler import Internal, Keyed, Output  # noqa: E402
from slipstream.loader import Loader, Memory, Order, Sharding, View  # noqa: E402
from slipstream.sources import (  # noqa: E402
    COCODetection,
    LitData,
    SegmentationFolder,
    VideoClips,
    VideoFolder,
    WebDataset,
    register_source,
)
from slipstream.errors import (  # noqa: E402
    ArgumentError,
    CacheWarning,
    CompileError,
    DatasetNotFoundError,
    DecodeError,
    EncodeError,
    FieldValueError,
    FormatError,
    LibraryError,
    LossWarning,
    NativeIOError,
    NativeMemoryError,
    OperationError,
    PipelineError,
    SampleIndexError,
    SampleWarning,
    SlipstreamError,
    SourceWarning,
    StorageError,
)


def _installed_version() -> str:
    """The version of the installed distribution, as pyproject.toml gives
    it (the one place it is written)."""
    import importlib.metadata

    try:
        return importlib.metadata.version("slipstream")
    except importlib.metadata.PackageNotFoundError:  # imported from a source tree that was never installed
        return "0+unknown"


__version__ = _installed_version()

__all__ = [
    "ArgumentError",
    "CompileError",
    "BytesField",
    "DatasetNotFoundError",
    "DecodeError",
    "EncodeError",
    "FieldValueError",
    "FloatField",
    "FormatError",
    "InstanceMasksField",
    "IntField",
    "Internal",
    "JSONField",
    "Keyed",
    "LibraryError",
    "LitData",
    "COCODetection",
    "SegmentationFolder",
    "Loader",
    "Memory",
    "NDArrayField",
    "RaggedField",
    "NativeIOError",
    "Remote",
    "StorageError",
    "NativeMemoryError",
    "OperationError",
    "Order",
    "PipelineError",
    "RGBImageField",
    "VideoClip",
    "VideoClips",
    "VideoField",
    "VideoFolder",
    "Reader",
    "SampleIndexError",
    "SampleWarning",
    "CacheWarning",
    "LossWarning",
    "SourceWarning",
    "SegmentationMaskField",
    "Sharding",
    "SlipstreamError",
    "View",
    "WebDataset",
    "cache",
    "cached",
    "convert",
    "fields",
    "native",
    "open_dataset",
    "ops",
    "Output",
    "register_location_scheme",
    "register_source",
    "write",
    "__version__",
]
