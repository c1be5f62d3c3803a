"""Former home of the FFCV ``.beton`` reader, kept for one release so that
old imports keep working.

``.beton`` files are parsed by :mod:`slipstream.format.beton` and opened by
:class:`slipstream.Reader` like any dataset file (``reader.format`` is then
``"ffcv"``).  ``BetonReader`` is :class:`slipstream.Reader`, with a
``DeprecationWarning``.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from slipstream.format import beton
from slipstream.format.beton import (  # noqa: F401  (the layout's names, for old imports)
    ALLOCATION, BYTES, DESCRIPTOR, FLOAT, HEADER, IMAGE, INT, JSON, METADATA, NAMES, NDARRAY, SLIPSTREAM_TYPE,
    TORCH_TENSOR, VERSION)
from slipstream.format.reader import Reader


def looks_like_beton(path: str | os.PathLike) -> bool:
    """Whether the file starts with an FFCV version-2 header (deprecated:
    :func:`slipstream.format.beton.is_beton_header` takes the first bytes)."""
    warnings.warn("slipstream.format.ffcv.looks_like_beton is deprecated: use "
                  "slipstream.format.beton.is_beton_header(first_bytes), or Reader(path).format",
                  DeprecationWarning, stacklevel=2)
    try:
        with open(path, "rb") as f:
            return beton.is_beton_header(f.read(beton.HEADER.itemsize))
    except OSError:
        return False


def __getattr__(name: str) -> Any:
    if name == "BetonReader":
        warnings.warn("slipstream.format.ffcv.BetonReader is deprecated: slipstream.Reader opens .beton files "
                      "itself (reader.format == 'ffcv' tells them apart)", DeprecationWarning, stacklevel=2)
        return Reader
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
