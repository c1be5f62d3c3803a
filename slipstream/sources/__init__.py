"""Where datasets come from: image folders, arrays, indexable datasets."""

from slipstream.sources.adapters import ArrayRows, IndexableSource, as_source
from slipstream.sources.folders import IMAGE_SUFFIXES, JPEG_SUFFIXES, ImageFolder, find_jpegs
from slipstream.sources.synthetic import CLASSES, synthetic_folder, synthetic_image

__all__ = ["ArrayRows", "CLASSES", "IMAGE_SUFFIXES", "ImageFolder", "IndexableSource", "JPEG_SUFFIXES", "as_source",
           "find_jpegs", "synthetic_folder", "synthetic_image"]
