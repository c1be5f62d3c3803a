"""libFuzzer harness (through atheris) for the dataset file parsers: the
slipstream format's reader and the FFCV ``.beton`` reader, and the loader
on whatever they accept (see format_target.py for what one input does).

The parsers are Python, so libFuzzer runs them through atheris, which feeds
it the coverage of their Python branches; native code they reach (page
reads, the JPEG kernels) runs in the sanitized, coverage-instrumented
library that ``make fuzz`` builds and preloads.

Run: ``make fuzz``, or ``python native/fuzz/fuzz_format.py CORPUS_DIR
-max_total_time=60`` (libFuzzer's flags).
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["slipstream.format", "slipstream.fields", "format_target"]):
    import format_target


def main() -> None:
    atheris.Setup(sys.argv, format_target.test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
