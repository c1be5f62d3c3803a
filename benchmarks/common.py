"""What the benchmark scripts share: medians with ranges, CPU seconds of
another process, writing their JSON results, and a folder's JPEGs
repeated into a bigger dataset."""

from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def summary(values: list[float], digits: int = 0) -> str:
    """``median [min-max]`` of ``values``, with ``digits`` decimals."""
    return f"{statistics.median(values):,.{digits}f} [{min(values):,.{digits}f}-{max(values):,.{digits}f}]"


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` and its reaped children (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds() -> float:
    """CPU seconds all processes of this machine have spent busy since boot (Linux)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # less idle and iowait


def time_loader(loader: Any, seconds: float, warmup: int = 2, consume: Callable[[Any, Any], None] | None = None,
                synchronize: Callable[[], None] = lambda: None) -> tuple[int, float, float]:
    """Take ``warmup`` batches of ``loader``, then batches until ``seconds``
    have passed (at least one, new epochs started as needed), each handed
    to ``consume(images, labels)`` when given; ``synchronize`` (a device's)
    runs at both ends of the timed part.  Returns the images timed, their
    wall seconds and the process's CPU seconds meanwhile."""
    batches = iter(loader)
    for _ in range(warmup):  # compilation, the thread pool, the first pages
        images, labels = next(batches)
        if consume is not None:
            consume(images, labels)
    synchronize()
    start, cpu, count = time.perf_counter(), time.process_time(), 0
    while time.perf_counter() - start < seconds or count == 0:
        for images, labels in batches:
            if consume is not None:
                consume(images, labels)
            count += labels.shape[0]
            if time.perf_counter() - start >= seconds:
                break
        else:
            batches = iter(loader)
    synchronize()
    return count, time.perf_counter() - start, time.process_time() - cpu


def write_json(path: Path, report: dict[str, Any]) -> None:
    """Write report to path through a temporary file, creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, path)


def record(result: dict[str, Any], name: str, out: Path | None = None) -> Path:
    """Add the machine and versions (``machine_info.describe``), the command
    and the time to a benchmark's ``result`` and write it to ``out``
    (default ``benchmarks/results/NAME-DATE.json``); the path written."""
    from machine_info import describe

    now = datetime.now().astimezone()
    result.update({"machine": describe(), "command": shlex.join([sys.executable, *sys.argv]),
                   "timestamp": now.isoformat(timespec="seconds")})
    out = out or RESULTS / f"{name}-{now.date().isoformat()}.json"
    write_json(out, result)
    return out


class Repeated:
    """A folder's JPEGs, ``times`` over, each labelled with its index
    (picklable, for the writer's workers)."""

    def __init__(self, paths: list[Path], times: int) -> None:
        self.paths, self.times = [str(p) for p in paths], times

    def __len__(self) -> int:
        return len(self.paths) * self.times

    def __getitem__(self, index: int) -> tuple[str, int]:
        return self.paths[index % len(self.paths)], index


def seconds_printed(script: str, env: dict[str, str], cwd: Path, what: str) -> float:
    """Run ``script`` in a fresh interpreter and return the number of
    seconds it printed last; a failure is a RuntimeError showing ``what``
    and the end of its stderr."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=cwd)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{done.stderr[-3000:]}")
    return float(done.stdout.strip().splitlines()[-1])
