"""Where datasets come from: image folders, arrays, indexable and iterable
datasets, WebDataset tar shards, Hugging Face and LitData datasets, COCO
detection datasets, segmentation mask folders, folders and tables of
videos; each a
:class:`~slipstream.sources.protocol.Source`, and any other kind added by
:func:`register_source`."""

from slipstream.sources.adapters import ArrayColumns, ArrayRows, IndexableSource, IterableSource, infer_fields
from slipstream.sources.any_source import as_source
from slipstream.sources.clips import VideoClips
from slipstream.sources.coco import COCODetection
from slipstream.sources.folders import IMAGE_SUFFIXES, JPEG_SUFFIXES, ImageFolder, VideoFolder, find_jpegs
from slipstream.sources.identity import IdentifiedSource, source_identity
from slipstream.sources.litdata import LitData
from slipstream.sources.paths import find_source, holds_dataset, source_at
from slipstream.sources.protocol import Source
from slipstream.sources.registry import register_source, registered_sources, unregister_source
from slipstream.sources.segmentation import SegmentationFolder
from slipstream.sources.synthetic import CLASSES, synthetic_folder, synthetic_image
from slipstream.sources.webdataset import WebDataset, expand_braces, member_value

__all__ = ["ArrayColumns", "ArrayRows", "CLASSES", "COCODetection", "IMAGE_SUFFIXES", "IdentifiedSource",
           "ImageFolder", "IndexableSource", "IterableSource", "JPEG_SUFFIXES", "LitData", "SegmentationFolder",
           "Source", "VideoClips", "VideoFolder", "WebDataset", "as_source", "expand_braces", "find_jpegs", "find_source", "holds_dataset",
           "infer_fields", "member_value", "register_source", "registered_sources", "source_at", "source_identity",
           "synthetic_folder", "synthetic_image", "unregister_source"]
