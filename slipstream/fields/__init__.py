"""Field types: how each column of a dataset is written and read back.

Every field class registers itself under a type id when it is defined, so
that :class:`slipstream.Reader` can rebuild the fields a file describes.
"""

from slipstream.fields.base import Encoded, Field
from slipstream.fields.basic import BytesField, FloatField, IntField, JSONField, NDArrayField
from slipstream.fields.image import RGBImageField
from slipstream.fields.masks import InstanceMasksField, SegmentationMaskField
from slipstream.fields.ragged import RaggedField
from slipstream.fields.video import StoredVideo, VideoClip, VideoField

__all__ = ["BytesField", "Encoded", "Field", "FloatField", "InstanceMasksField", "IntField", "JSONField",
           "NDArrayField", "RGBImageField", "RaggedField", "SegmentationMaskField",
           "StoredVideo", "VideoClip", "VideoField"]
