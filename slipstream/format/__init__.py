"""The dataset file: its byte layout, the parallel writer, and readers for
slipstream files, FFCV ``.beton`` files and sharded datasets
(:func:`open_dataset` opens any of them).  See ``docs/format.md``."""

from slipstream.format.layout import DEFAULT_PAGE_SIZE, VERSION, FieldDescriptor
from slipstream.format.reader import Reader, UnknownField
from slipstream.format.sharded import ShardedReader, open_dataset
from slipstream.format.write import write_dataset
from slipstream.format.writer import SampleSource, WriteResult

__all__ = ["DEFAULT_PAGE_SIZE", "VERSION", "FieldDescriptor", "Reader", "SampleSource", "ShardedReader",
           "UnknownField", "WriteResult", "open_dataset", "write_dataset"]
