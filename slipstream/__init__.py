"""slipstream: fast data loading for PyTorch vision training.

Datasets are converted once into a page-based file; a pipeline of operations
(decode, crop, flip, normalize, ...) is compiled into fused, GIL-free,
parallel machine code per stage, with the pixel work done by C kernels on
libjpeg-turbo.

The layers, each usable on its own: :mod:`slipstream.native` (the C kernels,
from Python and from Numba), :mod:`slipstream.compiler` (pipelines of
operations compiled into one parallel function per stage, usable on in-memory
arrays) and :mod:`slipstream.ops` (the operations).
"""

from slipstream import _threading

_threading.configure()

from slipstream import native  # noqa: E402
from slipstream.errors import (  # noqa: E402
    ArgumentError,
    DecodeError,
    EncodeError,
    LibraryError,
    NativeIOError,
    NativeMemoryError,
    SlipstreamError,
)

__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "DecodeError",
    "EncodeError",
    "LibraryError",
    "NativeIOError",
    "NativeMemoryError",
    "SlipstreamError",
    "native",
    "__version__",
]
