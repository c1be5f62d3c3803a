"""What the benchmark scripts share: writing their JSON results, and a
folder's JPEGs repeated into a bigger dataset."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path
from typing import Any


def summary(values: list[float], digits: int = 0) -> str:
    """``median [min-max]`` of ``values``, with ``digits`` decimals."""
    return f"{statistics.median(values):,.{digits}f} [{min(values):,.{digits}f}-{max(values):,.{digits}f}]"


def write_json(path: Path, report: dict[str, Any]) -> None:
    """Write report to path through a temporary file, creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, path)


class Repeated:
    """A folder's JPEGs, ``times`` over, each labelled with its index
    (picklable, for the writer's workers)."""

    def __init__(self, paths: list[Path], times: int) -> None:
        self.paths, self.times = [str(p) for p in paths], times

    def __len__(self) -> int:
        return len(self.paths) * self.times

    def __getitem__(self, index: int) -> tuple[str, int]:
        return self.paths[index % len(self.paths)], index
