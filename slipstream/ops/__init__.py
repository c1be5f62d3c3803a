"""Operations users write their training pipelines with."""

from slipstream.ops.stored import StoredBytes
from slipstream.ops.tensor import Convert, ToDevice

__all__ = ["Convert", "StoredBytes", "ToDevice"]
