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
from slipstream.ops.augmix import AugMix
from slipstream.ops.crops import CenterCrop, RandomCrop, RandomResizedCrop, Resize
from slipstream.ops.device_decode import DecodeOnDevice
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
from slipstream.ops.mixing import CutMix, MixLabels, MixUp, MixUpOrCutMix
from slipstream.ops.multicrop import MultiCrop, multi_crop_pipelines
from slipstream.ops.pack import Normalize, ToTensor
from slipstream.ops.policies import AutoAugment, RandAugment, TrivialAugmentWide
from slipstream.ops import presets
from slipstream.ops.stored import StoredBytes
from slipstream.ops.tensor import Convert, ToDevice
from slipstream.ops.timm_augment import TimmRandAugment
from slipstream.ops.tones import (
    RandomAdjustSharpness,
    RandomAutocontrast,
    RandomEqualize,
    RandomInvert,
    RandomPosterize,
)
from slipstream.ops.warps import RandomAffine, RandomPerspective, RandomRotation

__all__ = ["AugMix", "AutoAugment", "BoundingBoxes", "CenterCrop", "ColorJitter", "Convert", "Count", "CutMix",
           "Cutout", "DecodeOnDevice", "GaussianBlur", "InstanceMasks", "KeptWithBoxes", "Keypoints", "MixLabels", "MixUp",
           "MixUpOrCutMix", "multi_crop_pipelines", "MultiCrop", "Normalize", "presets", "RandAugment",
           "RandomAdjustSharpness", "RandomAffine", "RandomAutocontrast", "RandomBrightness", "RandomContrast",
           "RandomCrop", "RandomEqualize", "RandomErasing", "RandomGrayscale", "RandomHorizontalFlip", "RandomHue",
           "RandomInvert", "RandomIoUCrop", "RandomPerspective", "RandomPosterize", "RandomResizedCrop",
           "RandomRotation", "RandomSaturation", "RandomSolarize", "RandomTranslate", "RandomVerticalFlip", "Resize",
           "SegmentationMask", "StoredBytes", "TimmRandAugment", "ToDevice", "ToTensor", "TrimToCounts",
           "TrivialAugmentWide", "unpad"]
