"""Operations users write their training pipelines with.

Torch batch augmentations (for after ``ToDevice``) are in
:mod:`slipstream.ops.batch`, imported on its own so that ``import
slipstream`` does not import torch."""

from slipstream.ops.augment import (
    ColorJitter,
    Cutout,
    GaussianBlur,
    RandomBrightness,
    RandomContrast,
    RandomErasing,
    RandomGrayscale,
    RandomHorizontalFlip,
    RandomHue,
    RandomSaturation,
    RandomSolarize,
    RandomTranslate,
    RandomVerticalFlip,
)
from slipstream.ops.crops import CenterCrop, RandomCrop, RandomResizedCrop, Resize
from slipstream.ops.detection import (
    BoundingBoxes,
    Count,
    InstanceMasks,
    KeptWithBoxes,
    Keypoints,
    RandomIoUCrop,
    SegmentationMask,
    TrimToCounts,
    unpad,
)
from slipstream.ops.mixing import CutMix, MixLabels, MixUp
from slipstream.ops.multicrop import MultiCrop, multi_crop_pipelines
from slipstream.ops.pack import Normalize, ToTensor
from slipstream.ops import presets
from slipstream.ops.stored import StoredBytes
from slipstream.ops.tensor import Convert, ToDevice
from slipstream.ops.warps import RandomAffine, RandomPerspective, RandomRotation

__all__ = ["BoundingBoxes", "CenterCrop", "ColorJitter", "Convert", "Count", "CutMix", "Cutout", "GaussianBlur",
           "InstanceMasks", "KeptWithBoxes", "Keypoints", "MixLabels", "MixUp", "multi_crop_pipelines", "MultiCrop", "Normalize",
           "presets", "RandomAffine", "RandomBrightness", "RandomContrast", "RandomCrop", "RandomErasing", "RandomGrayscale",
           "RandomHorizontalFlip", "RandomHue", "RandomIoUCrop", "RandomPerspective", "RandomResizedCrop",
           "RandomRotation", "RandomSaturation",
           "RandomSolarize", "RandomTranslate", "RandomVerticalFlip", "Resize", "SegmentationMask", "StoredBytes",
           "ToDevice", "ToTensor", "TrimToCounts", "unpad"]
