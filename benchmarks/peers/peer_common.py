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


def read_spec(argv: list[str], description: str, started: float) -> dict:
    """The SPEC.json named by ``--spec``, with every key RUNNERS.md defines
    filled in: defaults, and ``start`` (the orchestrator's clock, else this
    runner's first line, ``started``)."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--spec", required=True, help="SPEC.json")
    with open(parser.parse_args(argv).spec) as fh:
        spec = json.load(fh)
    spec["batch_size"] = int(spec.get("batch_size", 128))
    spec["threads"] = int(spec.get("threads") or os.cpu_count() or 1)
    spec["epochs"] = int(spec.get("epochs", 1))
    spec["warmup_epochs"] = int(spec.get("warmup_epochs", 0))
    spec["first_batch_only"] = bool(spec.get("first_batch_only", False))
    spec["start"] = started if spec.get("start_monotonic") is None else float(spec["start_monotonic"])
    return spec


def timed_epochs(loader, images_in, warmup: int, epochs: int) -> dict:
    """``warmup`` untimed epochs, then ``epochs`` timed ones that only count
    the images of each batch (``images_in(batch)``), as a training step
    receiving them would; RUNNERS.md's throughput and CPU-time keys."""
    import time

    rates, counts, cpu_start = [], [], None
    for epoch in range(warmup + epochs):
        if epoch == warmup:
            cpu_start = cpu_seconds()
        started, n = time.perf_counter(), 0
        for batch in loader:
            n += images_in(batch)
        took = time.perf_counter() - started
        if epoch >= warmup:
            rates.append(n / took)
            counts.append(n)
    cpu = cpu_seconds() - cpu_start if cpu_start is not None else 0.0
    return {"epoch_images_per_s": rates, "images": counts[0] if counts else 0,
            "cpu_seconds_per_image": cpu / sum(counts) if counts and sum(counts) else None}
