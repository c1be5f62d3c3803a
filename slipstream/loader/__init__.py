"""The loader: orders, memory managers and the epoch iterator that turn a
dataset file and compiled pipelines into batches of torch tensors."""

from slipstream.loader.loader import Loader
from slipstream.loader.memory import MappedMemory, PagePool
from slipstream.loader.orders import ORDERS
from slipstream.loader.outputs import View

__all__ = ["Loader", "MappedMemory", "ORDERS", "PagePool", "View"]
