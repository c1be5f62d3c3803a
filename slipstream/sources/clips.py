"""Clips of videos listed in a table: a path, a start, an end and a label
per row, as action-recognition datasets annotate long videos.

``VideoClips("train.csv")`` reads a CSV file with a header, a JSON file (a
list of objects) or JSON Lines (``.jsonl``, one object per line), or takes
the rows themselves (mappings, or ``(path, start, end, label)`` tuples).
Each row is a sample: the :class:`~slipstream.fields.video.VideoClip` of
the frames shown from ``start`` to ``end`` seconds (empty or absent: the
video's first frame, its last), and its label::

    path,start,end,label
    videos/abseiling/0347ZoDXyP0.mp4,14.0,24.0,abseiling
    videos/archery/0DY5WmQvT64.mp4,,,archery

Relative paths are read from ``root`` (default: the table's folder).
Labels that are all integers are kept; otherwise they are class names,
numbered in sorted order as :class:`~slipstream.sources.ImageFolder`
numbers its class folders, and stored in the file's metadata.  Other
column names are mapped with ``columns`` (``{"path": "video_file",
"label": "class"}``).

Every clip stores its video's whole container: a video cut into many clips
is stored once per clip, so a table of many clips per long video is best
cut into short videos first (``ffmpeg -ss START -to END -c copy``).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from slipstream.errors import ArgumentError, DatasetNotFoundError
from slipstream.fields.video import VideoClip
from slipstream.sources.folders import fingerprint_line, shown_path

COLUMNS = ("path", "start", "end", "label")
"""What a row holds, by the names the table's columns have unless ``columns`` maps them."""


class VideoClips:
    """Clips of videos listed in a table (see the module docstring).

    ``clips[i]`` is ``(VideoClip, label)``, the values of a
    :class:`~slipstream.fields.VideoField` and an ``IntField``.

    Args:
        table: a ``.csv``, ``.json`` or ``.jsonl`` file, or the rows.
        root: the folder relative paths are read from (default: the
            table's folder; the working directory for rows given).
        columns: our name (``path``, ``start``, ``end``, ``label``) ->
            the table's column name, for the names that differ.

    Raises:
        DatasetNotFoundError: the table, or a video it lists, does not exist.
        ArgumentError: a table without a path column, a row whose start or
            end is no number of seconds or that ends before it starts, an
            unknown ``columns`` name, or no rows.
    """

    def __init__(self, table: str | os.PathLike | Iterable[Any], root: str | os.PathLike | None = None,
                 columns: Mapping[str, str] | None = None) -> None:
        unknown = sorted(set(columns or {}) - set(COLUMNS))
        if unknown:
            raise ArgumentError(f"columns maps {', '.join(map(repr, unknown))}: the names it maps are "
                                f"{', '.join(COLUMNS)}")
        names = {name: (columns or {}).get(name, name) for name in COLUMNS}
        self.table = Path(table) if isinstance(table, (str, os.PathLike)) else None
        rows = _read_table(self.table) if self.table is not None else list(table)
        self.root = Path(root) if root is not None else (self.table.parent if self.table is not None else Path("."))
        self._where = shown_path(self.table) if self.table is not None else "the rows given"
        if not rows:
            raise ArgumentError(f"{self._where} lists no clips")
        parsed = [self._row(k, row, names) for k, row in enumerate(rows)]
        labels = [label for _, _, _, label in parsed]
        if all(isinstance(label, int) for label in labels):
            self.classes: list[str] | None = None
            numbers = labels
        else:
            self.classes = sorted({str(label) for label in labels})
            number = {name: k for k, name in enumerate(self.classes)}
            numbers = [number[str(label)] for label in labels]
        self.clips = [(VideoClip(path, start, end), label)
                      for (path, start, end, _), label in zip(parsed, numbers)]
        missing = [path for path, *_ in parsed if not path.is_file()]
        if missing:
            shown = ", ".join(shown_path(p) for p in missing[:3]) + (" ..." if len(missing) > 3 else "")
            raise DatasetNotFoundError(f"{self._where}: {len(missing)} of its {len(parsed)} clips name a video that "
                                       f"does not exist ({shown}); relative paths are read from {self.root}")

    def _row(self, k: int, row: Any, names: Mapping[str, str]) -> tuple[Path, float | None, float | None, Any]:
        """Row ``k`` as (path, start, end, label), checked."""
        if isinstance(row, Mapping):
            if names["path"] not in row:
                raise ArgumentError(f"{self._where} row {k + 1} has no {names['path']!r} column (columns: "
                                    f"{', '.join(map(str, row))}); name the video's column with "
                                    f"columns={{'path': ...}}")
            values = [row.get(names[name]) for name in COLUMNS]
        elif isinstance(row, Sequence) and not isinstance(row, (str, bytes)) and 1 <= len(row) <= 4:
            values = [*row, *[None] * (4 - len(row))]
        else:
            raise ArgumentError(f"{self._where} row {k + 1} is neither a mapping nor a (path, start, end, label) "
                                f"tuple: {row!r}")
        path, start, end, label = values
        where = f"{self._where} row {k + 1}"
        if label is None or label == "":
            label = 0
        elif isinstance(label, str) and label.strip().lstrip("-").isdigit():
            label = int(label)
        elif isinstance(label, float) and label.is_integer():
            label = int(label)
        elif not isinstance(label, (int, str)) or isinstance(label, bool):
            raise ArgumentError(f"{where}: a label is an integer or a class name, got {label!r}")
        try:
            clip = VideoClip(b"", _seconds(start, where, "start"), _seconds(end, where, "end"))
        except ArgumentError as exc:
            raise ArgumentError(f"{where}: {exc}") from None
        full = Path(path) if Path(path).is_absolute() else self.root / path
        return full, clip.start, clip.end, label

    def __len__(self) -> int:
        return len(self.clips)

    def __getitem__(self, index: int) -> tuple[VideoClip, int]:
        return self.clips[index]

    def describe(self, index: int) -> str:
        """The clip's video and seconds, for error messages."""
        clip = self.clips[index][0]
        return f"{shown_path(clip.video)} from {clip.start or 0} to {clip.end if clip.end is not None else 'its end'} s"

    def default_fields(self) -> dict[str, Any]:
        """The fields written when none are given: ``video`` and ``label`` (int)."""
        from slipstream.fields import IntField, VideoField

        return {"video": VideoField(), "label": IntField()}

    def user_metadata(self) -> dict[str, Any]:
        """Stored in the file's metadata: the class names, in label order, where labels are names."""
        return {"classes": self.classes} if self.classes is not None else {}

    def samples_for(self, fields: Mapping[str, Any]) -> VideoClips:
        """Itself: ``clips[i]`` is ``(VideoClip, label)``."""
        return self

    def identity(self) -> dict[str, Any]:
        """What :func:`slipstream.cached` keys the clips' dataset file by:
        every clip's video path, size and modification time, its seconds
        and label."""
        digest = hashlib.sha256()
        for clip, label in self.clips:
            stat = os.stat(clip.video)
            digest.update(fingerprint_line(clip.video, clip.start, clip.end, label, stat.st_size, stat.st_mtime_ns))
        return {"clips": str(self.table.resolve()) if self.table is not None else None, "content": digest.hexdigest(),
                "classes": self.classes}

    def cache_name(self) -> str:
        """The table's name, which starts its cached file's name."""
        return self.table.stem if self.table is not None else "clips"

    def __repr__(self) -> str:
        kind = f"{len(self.classes)} classes" if self.classes is not None else "integer labels"
        return f"VideoClips({self._where!r}, {len(self.clips)} clips, {kind})"


def _read_table(table: Path) -> list[Any]:
    """The rows of a ``.csv`` (with a header), ``.json`` (a list) or ``.jsonl`` file."""
    if not table.is_file():
        raise DatasetNotFoundError(f"{shown_path(table)} does not exist (the table of clips)")
    suffix = table.suffix.lower()
    with open(table, newline="", encoding="utf-8") as file:
        if suffix == ".csv":
            return list(csv.DictReader(file))
        if suffix == ".jsonl":
            lines = [(k, line) for k, line in enumerate(file) if line.strip()]
            return [_json(table, text, f" line {k + 1}") for k, text in lines]
        if suffix == ".json":
            rows = _json(table, file.read(), "")
            if not isinstance(rows, list):
                raise ArgumentError(f"{shown_path(table)} holds a JSON {type(rows).__name__}, not a list of clips")
            return rows
    raise ArgumentError(f"{shown_path(table)}: a table of clips is a .csv, .json or .jsonl file")


def _json(table: Path, text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ArgumentError(f"{shown_path(table)}{where} is not JSON: {exc}") from None


def _seconds(value: Any, where: str, name: str) -> float | None:
    """A start or end as the table gives it (a number, its text, or empty) in seconds."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise ArgumentError(f"{where}: {name} must be a number of seconds, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentError(f"{where}: {name} must be a number of seconds, got {value!r}")
    return float(value)


__all__ = ["COLUMNS", "VideoClips"]
