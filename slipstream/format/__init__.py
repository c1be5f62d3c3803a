"""The dataset file: its byte layout, the parallel writer, and readers for
slipstream files and FFCV ``.beton`` files.  See ``docs/format.md``."""

from slipstream.format.layout import DEFAULT_PAGE_SIZE, VERSION, FieldDescriptor
from slipstream.format.reader import Reader, UnknownField
from slipstream.format.writer import SampleSource, WriteResult, write_dataset

__all__ = ["DEFAULT_PAGE_SIZE", "VERSION", "FieldDescriptor", "Reader", "SampleSource", "UnknownField",
           "WriteResult", "write_dataset"]
