"""Writes the parameter tables of docs/operations.md from the operations'
declarations (:mod:`slipstream.compiler.params`).

Usage::

    python docs/tables.py            # rewrites the tables in docs/operations.md
    python docs/tables.py --check    # exit status 1 when a table differs from its declarations

The section of an operation that declares its arguments (``### `Name` ``)
holds its table under the line :data:`MARK`; the rest of the page is
written by hand.  The tests run :func:`regenerate` on the page and require
it unchanged.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parent / "operations.md"
MARK = "<!-- parameters: generated from the declarations by docs/tables.py -->"
_SECTION = re.compile(r"^### `([\w.]+)`$")


def declared_classes() -> dict[str, type]:
    """Every documented operation of ``slipstream.ops`` that declares its
    arguments, by the name its section has."""
    from slipstream import ops
    from slipstream.compiler import params

    found = {}
    for name in ops.__all__:
        obj = getattr(ops, name)
        if isinstance(obj, type) and params.declares(obj):  # operations, and a crop's ResolutionSchedule
            found[name] = obj
    return found


def regenerate(text: str) -> str:
    """``text`` (the page) with the table of every declared operation's
    section written from its declarations, under :data:`MARK`."""
    from slipstream.compiler import params

    classes = declared_classes()
    lines = text.split("\n")
    out: list[str] = []
    k, fenced, current = 0, False, None
    while k < len(lines):
        line = lines[k]
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("#"):
            match = _SECTION.match(line)
            current = match.group(1) if match and match.group(1) in classes else None
        starts_table = not fenced and current is not None and (line == MARK or line.startswith("| parameter |"))
        if not starts_table:
            out.append(line)
            k += 1
            continue
        if line == MARK:
            k += 1
        while k < len(lines) and lines[k].startswith("|"):  # the table written before
            k += 1
        out += [MARK, params.table(classes[current])]
        current = None  # one table per section
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check; exit status 1 when a table differs")
    args = parser.parse_args()
    text = PAGE.read_text(encoding="utf-8")
    written = regenerate(text)
    if args.check:
        if written != text:
            print(f"{PAGE}: the parameter tables differ from the declarations: run python docs/tables.py",
                  file=sys.stderr)
            return 1
        return 0
    if written != text:
        PAGE.write_text(written, encoding="utf-8")
        print(f"rewrote the parameter tables of {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
