"""Operations users write their training pipelines with."""

from slipstream.ops.augment import RandomHorizontalFlip, RandomVerticalFlip
from slipstream.ops.crops import CenterCrop, RandomCrop, RandomResizedCrop, Resize
from slipstream.ops.multicrop import MultiCrop, TakeCrop, multi_crop_pipelines
from slipstream.ops.pack import Normalize, ToTensor
from slipstream.ops import presets
from slipstream.ops.stored import StoredBytes
from slipstream.ops.tensor import Convert, ToDevice

__all__ = ["CenterCrop", "Convert", "MultiCrop", "Normalize", "RandomCrop", "RandomHorizontalFlip", "RandomResizedCrop",
           "RandomVerticalFlip", "Resize", "StoredBytes", "TakeCrop", "ToDevice", "ToTensor", "multi_crop_pipelines", "presets"]
