"""Operations users write their training pipelines with.

Torch batch augmentations (for after ``ToDevice``) are in
:mod:`slipstream.ops.batch`, imported on its own so that ``import
slipstream`` does not import torch.

The operations of the less common recipes (the auto-augmentation policies
and their tone and warp operations, AugMix, detection and segmentation,
decoding on a device) are imported the first time one of them is named:
each operation is a frozen dataclass and declares its Numba kernels as its
module runs, which would otherwise add a tenth of a second to every
``import slipstream``."""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

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
from slipstream.ops.crops import CenterCrop, RandomCrop, RandomResizedCrop, ResolutionSchedule, Resize
from slipstream.ops.mixing import CutMix, MixLabels, MixUp, MixUpOrCutMix
from slipstream.ops.multicrop import MultiCrop, multi_crop_pipelines
from slipstream.ops.pack import Normalize, ToTensor
from slipstream.ops import presets
from slipstream.ops.stored import StoredBytes
from slipstream.ops.tensor import Convert, ToDevice

# Each operation imported when first named, and its module.
_LAZY = {
    "AugMix": "augmix",
    "AutoAugment": "policies",
    "RandAugment": "policies",
    "TrivialAugmentWide": "policies",
    "BoundingBoxes": "detection",
    "Count": "detection",
    "InstanceMasks": "detection",
    "KeptWithBoxes": "detection",
    "Keypoints": "detection",
    "RandomIoUCrop": "detection",
    "SegmentationMask": "detection",
    "TrimToCounts": "detection",
    "unpad": "detection",
    "DecodeOnDevice": "device_decode",
    "TimmRandAugment": "timm_augment",
    "RandomAdjustSharpness": "tones",
    "RandomAutocontrast": "tones",
    "RandomEqualize": "tones",
    "RandomInvert": "tones",
    "RandomPosterize": "tones",
    "RandomAffine": "warps",
    "RandomPerspective": "warps",
    "RandomRotation": "warps",
    "VideoWindow": "video",
    "SequenceWindow": "sequence",
    "window_starts": "sequence",
}

if TYPE_CHECKING:  # what the names are, for type checkers and editors
    from slipstream.ops.augmix import AugMix
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
    from slipstream.ops.device_decode import DecodeOnDevice
    from slipstream.ops.policies import AutoAugment, RandAugment, TrivialAugmentWide
    from slipstream.ops.timm_augment import TimmRandAugment
    from slipstream.ops.tones import (
        RandomAdjustSharpness,
        RandomAutocontrast,
        RandomEqualize,
        RandomInvert,
        RandomPosterize,
    )
    from slipstream.ops.sequence import SequenceWindow, window_starts
    from slipstream.ops.video import VideoWindow
    from slipstream.ops.warps import RandomAffine, RandomPerspective, RandomRotation


def __getattr__(name: str) -> Any:
    """An operation of :data:`_LAZY`, or a submodule (``slipstream.ops.detection``), imported now."""
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    elif name.isidentifier() and not name.startswith("__") and \
            importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The names imported so far and the operations imported when first named."""
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["AugMix", "AutoAugment", "BoundingBoxes", "CenterCrop", "ColorJitter", "Convert", "Count", "CutMix",
           "Cutout", "DecodeOnDevice", "GaussianBlur", "InstanceMasks", "KeptWithBoxes", "Keypoints", "MixLabels",
           "MixUp", "MixUpOrCutMix", "MultiCrop", "Normalize", "RandAugment", "RandomAdjustSharpness",
           "RandomAffine", "RandomAutocontrast", "RandomBrightness", "RandomContrast", "RandomCrop",
           "RandomEqualize", "RandomErasing", "RandomGrayscale", "RandomHorizontalFlip", "RandomHue", "RandomInvert",
           "RandomIoUCrop", "RandomPerspective", "RandomPosterize", "RandomResizedCrop", "RandomRotation",
           "RandomSaturation", "RandomSolarize", "RandomTranslate", "RandomVerticalFlip", "Resize",
           "ResolutionSchedule", "SegmentationMask", "SequenceWindow", "StoredBytes", "TimmRandAugment", "ToDevice",
           "ToTensor", "TrimToCounts", "TrivialAugmentWide", "VideoWindow", "multi_crop_pipelines", "presets", "unpad",
           "window_starts"]
