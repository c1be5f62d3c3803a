"""Where samples come from: image folders (and, later, indexable datasets and arrays)."""

from slipstream.sources.folders import JPEG_SUFFIXES, find_jpegs

__all__ = ["JPEG_SUFFIXES", "find_jpegs"]
