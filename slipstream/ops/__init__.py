"""Operations users write their training pipelines with."""

from slipstream.ops.augment import RandomHorizontalFlip, RandomVerticalFlip
from slipstream.ops.crops import CenterCrop, RandomCrop, RandomResizedCrop, Resize
from slipstream.ops.pack import Normalize, ToTensor
from slipstream.ops.stored import StoredBytes
from slipstream.ops.tensor import Convert, ToDevice

__all__ = ["CenterCrop", "Convert", "Normalize", "RandomCrop", "RandomHorizontalFlip", "RandomResizedCrop",
           "RandomVerticalFlip", "Resize", "StoredBytes", "ToDevice", "ToTensor"]
