"""What every peer's runner (and FFCV's writer) shares: the folder's
samples and labels, and the CPU-time and memory accounting that RUNNERS.md
asks for.  Standard library only: it is imported from each peer's own
environment."""

import json
import os
import resource
import sys
from pathlib import Path

JPEG_SUFFIXES = {".jpg", ".jpeg"}


def find_samples(folder: Path) -> list[tuple[Path, int]]:
    """Sorted (path, label) pairs for a flat folder (label: the sorted file-name
    prefixes before the first underscore, e.g. ImageNet's wnids) or a
    ``root/<class>/<image>`` tree."""
    paths = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and p.suffix.lower() in JPEG_SUFFIXES and len(p.relative_to(folder).parts) <= 2
    )
    if not paths:
        raise SystemExit(f"{Path(sys.argv[0]).stem}: no JPEG files in {folder}")

    def class_of(p: Path) -> str:
        rel = p.relative_to(folder)
        return rel.parts[0] if len(rel.parts) == 2 else p.name.split("_", 1)[0]

    classes = sorted({class_of(p) for p in paths})
    index = {c: i for i, c in enumerate(classes)}
    return [(p, index[class_of(p)]) for p in paths]


def _child_pids() -> list[int]:
    """Live descendants of this process (from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [os.getpid()]
    while todo:
        kids = parents.get(todo.pop(), [])
        out.extend(kids)
        todo.extend(kids)
    return out


def _live_children_cpu() -> float:
    """utime + stime (+ their reaped children's) of live descendants, in seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in _child_pids():
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
    return total / tick


def live_children_hwm_mb() -> float:
    """Sum of the live descendants' peak RSS (VmHWM), in MB (shared pages counted per process)."""
    total_kb = 0
    for pid in _child_pids():
        try:
            with open(f"/proc/{pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        total_kb += int(line.split()[1])
                        break
        except OSError:
            continue
    return total_kb / 1024.0


def cpu_seconds() -> float:
    """Process CPU time: getrusage SELF + CHILDREN, plus live child processes."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime + _live_children_cpu()


def peak_rss_mb() -> float:
    """ru_maxrss of the process plus that of its largest reaped child, in MB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return (own + kids) / 1024.0


def emit(result: dict) -> None:
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
