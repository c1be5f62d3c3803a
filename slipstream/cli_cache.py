"""The command line's view of the dataset cache: ``slipstream cache list |
prune``, and what ``slipstream info`` says of a source (a folder of images,
tar shards) instead of a dataset file: where its cached file is."""

from __future__ import annotations

import argparse
import datetime
import re
from pathlib import Path
from typing import Any

AGE_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
"""The units of ``--older-than``."""


def add_parser(commands: Any, path_type: Any) -> None:
    """Add ``cache list`` and ``cache prune`` to the subcommands ``commands``
    (``path_type``: the type of path arguments)."""
    cache = commands.add_parser("cache", help="list or prune the dataset files kept for sources (ss.cached, a Loader "
                                              "over a folder)")
    actions = cache.add_subparsers(dest="cache_command", required=True)
    listing = actions.add_parser("list", help="each dataset file of the cache: size, last use, state, how its "
                                              "images are stored, source")
    pruning = actions.add_parser("prune", help="remove dataset files (never one a process holds), and lock and "
                                               "temporary files nothing holds")
    for parser in (listing, pruning):
        parser.add_argument("--cache-dir", type=path_type, default=None,
                            help="the cache folder (default: $SLIPSTREAM_CACHE_DIR/datasets, else "
                                 "~/.cache/slipstream/datasets)")
    pruning.add_argument("--stale", action="store_true",
                         help="remove the files superseded by a newer copy of the same source, and those whose "
                              "source folder is gone")
    pruning.add_argument("--older-than", type=_age, default=None, metavar="AGE",
                         help="remove the files not used for AGE, e.g. 30d, 12h, 90min, 2w")
    pruning.add_argument("--max-size", default=None, metavar="SIZE",
                         help="then remove the least recently used files until the rest take at most SIZE, e.g. "
                              "100GB")
    pruning.add_argument("--all", action="store_true", help="remove every file (but those a process holds)")
    pruning.add_argument("--dry-run", action="store_true", help="remove nothing: say what would be removed")


def run(args: argparse.Namespace) -> int:
    """Run ``cache list`` or ``cache prune``: print the report, return the exit status."""
    import slipstream as ss
    from slipstream.format.remote import parse_size

    if args.cache_command == "list":
        print(listing(ss.cache.list(args.cache_dir), args.cache_dir))
        return 0
    limit = None if args.max_size is None else parse_size(args.max_size, "--max-size")
    pruned = ss.cache.prune(args.cache_dir, stale=args.stale, older_than=args.older_than, max_bytes=limit,
                            everything=args.all, dry_run=args.dry_run)
    print(pruning(pruned, ss.cache.list(args.cache_dir)))
    return 0


def listing(entries: tuple[Any, ...], cache_dir: str | None) -> str:
    """What ``cache list`` prints of ``entries`` (most recently used first)."""
    from slipstream.cache import datasets_folder
    from slipstream.cache_files import human_size

    total = sum(entry.bytes for entry in entries)
    lines = [f"{datasets_folder(cache_dir)}: {_count(len(entries), 'dataset file')}, {human_size(total)}"]
    if entries:
        rows = [(human_size(e.bytes), _when(e.last_used), _state(e), e.write_mode or "-", e.path.name, _source(e))
                for e in entries]
        rows.insert(0, ("size", "last use", "state", "images", "file", "source"))
        widths = [max(len(row[k]) for row in rows) for k in range(5)]
        lines += ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row[:5], widths)) + "  " + row[5]
                  for row in rows]
    stale = [e for e in entries if e.stale and not e.held]
    if stale:
        lines.append(f"{_count(len(stale), 'stale file')} ({human_size(sum(e.bytes for e in stale))}): "
                     f"`slipstream cache prune --stale` removes {'it' if len(stale) == 1 else 'them'}")
    return "\n".join(lines)


def pruning(pruned: Any, left: tuple[Any, ...]) -> str:
    """What ``cache prune`` prints: each file removed (or that would be),
    each kept because a process holds it, the other files removed, and
    what is left."""
    from slipstream.cache_files import human_size

    verb = "would remove" if pruned.dry_run else "removed"
    lines = [f"{verb} {e.path.name} ({human_size(e.bytes)}, {_state(e)}): {_source(e)}" for e in pruned.removed]
    lines += [f"kept {e.path.name} ({human_size(e.bytes)}): a process holds it" for e in pruned.held]
    if pruned.leftovers:
        lines.append(f"{verb} {_count(len(pruned.leftovers), 'lock, note or temporary file')} nothing holds: "
                     f"{', '.join(p.name for p in pruned.leftovers[:3])}{', ...' if len(pruned.leftovers) > 3 else ''}")
    if not pruned.dry_run:
        lines.append(f"freed {human_size(pruned.freed_bytes)}; {_count(len(left), 'dataset file')} left, "
                     f"{human_size(sum(e.bytes for e in left))}")
    else:
        lines.append(f"would free {human_size(pruned.freed_bytes)}")
    return "\n".join(lines)


def source_report(name: str) -> tuple[str, Path | None] | None:
    """What ``slipstream info`` says of ``name`` when it is a local source
    (a folder of images, tar shards, a LitData folder) rather than a
    dataset: what it is and where its dataset file is (or would be), and
    that file when it exists; None when ``name`` is no such source."""
    from slipstream.cache_files import human_size
    from slipstream.cache_use import estimated_bytes
    from slipstream.convert import cache_entry
    from slipstream.errors import SlipstreamError
    from slipstream.format.remote import is_url
    from slipstream.sources.paths import find_source

    path = Path(name)
    if is_url(name) or not (path.is_dir() or (path.is_file() and path.suffix == ".tar")):
        return None
    try:
        source = find_source(name)
    except SlipstreamError:
        return None  # not a source after all (a folder of no images): the dataset's reader says what it is
    if source is None:
        return None
    entry = cache_entry(source, create=False)
    lines = [f"{name}: a source, not a dataset file: {source!r}"]
    if entry.path.exists():
        lines.append(f"its dataset file in the cache: {entry.path} ({entry.path.stat().st_size:,} bytes)")
    else:
        estimate = estimated_bytes(entry)
        size = "" if estimate is None else f", about {human_size(estimate)}"
        lines.append(f"its dataset file in the cache: {entry.path}, not written yet (a Loader over {name}, or "
                     f"ss.cached({name!r}), writes it{size})")
    lines.append("(with the default fields; fields= or write_mode= give other files: `slipstream cache list` "
                 "lists them all)")
    return "\n".join(lines), entry.path if entry.path.exists() else None


def _source(entry: Any) -> str:
    """The source of ``entry`` as its ``repr`` shows it, with its location
    when the ``repr`` does not show it (a folder given by a relative path)."""
    if entry.source is None:
        return "(not recorded)"
    if entry.location is None or entry.location in entry.source:
        return entry.source
    return f"{entry.source} at {entry.location}"


def _state(entry: Any) -> str:
    states = [s for s, on in (("superseded", entry.superseded), ("source gone", entry.source_gone),
                              ("in use", entry.held)) if on]
    return ", ".join(states) or "current"


def _when(moment: datetime.datetime) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M")


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _age(text: str) -> float:
    """Seconds from an ``--older-than`` text such as ``30d`` or ``12h``."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]+)\s*", text.lower())
    if not match or match.group(2) not in AGE_UNITS:
        raise argparse.ArgumentTypeError(f"an age such as 30d, 12h, 90min or 2w (units: "
                                         f"{', '.join(AGE_UNITS)}), got {text!r}")
    return float(match.group(1)) * AGE_UNITS[match.group(2)]

