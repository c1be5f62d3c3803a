"""The loader: orders, the stager and the epoch iterator that turn a
dataset file and compiled pipelines into batches of torch tensors; and the
option groups that describe them (:mod:`slipstream.loader.options`)."""

from slipstream.loader.iterator import EpochIterator, EpochPlan
from slipstream.loader.loader import Loader
from slipstream.loader.options import LoaderOptions, Memory, Order, Sharding
from slipstream.loader.orders import ORDERS
from slipstream.loader.stats import LoaderStats
from slipstream.compiler.graph import View

__all__ = [
           "ORDERS",
           "EpochIterator",
           "EpochPlan",
           "Loader",
           "LoaderOptions",
           "LoaderStats",
           "Memory",
           "Order",
           "Sharding",
           "View",
]
