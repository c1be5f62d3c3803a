"""Where datasets come from: image folders, arrays, indexable and iterable
datasets, WebDataset tar shards, Hugging Face and LitData datasets, COCO
detection datasets and segmentation mask folders."""

from slipstream.sources.adapters import ArrayRows, IndexableSource, IterableSource, infer_fields
from slipstream.sources.any_source import as_source
from slipstream.sources.coco import COCODetection
from slipstream.sources.folders import IMAGE_SUFFIXES, JPEG_SUFFIXES, ImageFolder, find_jpegs
from slipstream.sources.litdata import LitData
from slipstream.sources.segmentation import SegmentationFolder
from slipstream.sources.synthetic import CLASSES, synthetic_folder, synthetic_image
from slipstream.sources.webdataset import WebDataset, expand_braces, member_value

__all__ = ["ArrayRows", "CLASSES", "COCODetection", "IMAGE_SUFFIXES", "ImageFolder", "IndexableSource",
           "IterableSource", "JPEG_SUFFIXES", "LitData", "SegmentationFolder", "WebDataset", "as_source",
           "expand_braces", "find_jpegs", "infer_fields", "member_value", "synthetic_folder", "synthetic_image"]
