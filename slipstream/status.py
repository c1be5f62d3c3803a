"""``slipstream status``: what a loader's speed depends on here, in one
screen, and each problem found with its fix.

It reads the machine (the processor and the vector extensions the kernels
use, the cores this process may run on and the CPU quota of its control
group, the threads a loader starts by default), the software (slipstream's
library and whether it decodes video, Numba, torch and CUDA), the caches
(compiled stages, converted datasets: where, how big, how much room is
left) and, unless asked not to, streams generated photos through the
standard ImageNet training pipeline for a few seconds and compares the rate
with what this many cores give where nothing else runs.

Each part is a frozen record read by a function of its own, so that
:func:`findings` can be given any machine (the tests give it a quota, an
old processor, a full disk).
"""

from __future__ import annotations

import dataclasses
import math
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

from slipstream.cache_files import human_size

VECTOR_EXTENSIONS = ("sse4_2", "avx2", "avx512f", "avx512bw")
"""The x86 extensions that say which code paths the kernels and libjpeg-turbo take."""

IMAGES_PER_S_PER_CORE = 1600.0
"""What the speed check gives per core where nothing else runs: generated
500 x 375 JPEGs (smooth pictures, which decode faster than photos) through
``presets.imagenet_train(224)``, 3,200 images/s on the 2-core Xeon (AVX-512)
machine slipstream is developed on.  Photos go slower: BENCHMARKS.md gives
the benchmarks on them."""

SLOW_SHARE = 0.5
"""Below this share of the expected rate the speed check is a problem."""

LOW_ROOM = 2 << 30
"""Free bytes below which a cache's disk is said to be nearly full."""


@dataclasses.dataclass(frozen=True)
class Finding:
    """A problem found, and what to do about it."""

    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.problem}\n    fix: {self.fix}"


@dataclasses.dataclass(frozen=True)
class Machine:
    """The processor and the cores a loader may use.

    Attributes:
        cpu: the processor's name.
        extensions: which of :data:`VECTOR_EXTENSIONS` it has.
        cores: logical CPUs of the machine.
        usable: those this process may run on (its affinity).
        quota: CPUs' worth of time the control group allows per second
            (``cpu.max``, or cgroup v1's CFS quota); None: no limit.
        threads: the threads a loader's compiled stages start by default
            (``NUMBA_NUM_THREADS``).
        load: the 1-minute load average.
    """

    cpu: str
    extensions: tuple[str, ...]
    cores: int
    usable: int
    quota: float | None
    threads: int
    load: float


@dataclasses.dataclass(frozen=True)
class Cache:
    """One of slipstream's caches: where it is, what it holds, the room left on its disk."""

    name: str
    path: Path
    size: int
    free: int


@dataclasses.dataclass(frozen=True)
class Software:
    """The versions a loader runs on."""

    python: str
    slipstream: str
    library: str
    video: bool
    numba: str
    torch: str
    cuda: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Speed:
    """The speed check: images/s through the standard pipeline, and what
    ``threads`` threads give where nothing else runs."""

    images_per_s: float
    threads: int

    @property
    def expected(self) -> float:
        """Images/s that ``threads`` threads give where nothing else runs (:data:`IMAGES_PER_S_PER_CORE` each)."""
        return IMAGES_PER_S_PER_CORE * self.threads


def read_machine(proc: Path = Path("/proc"), cgroup: Path = Path("/sys/fs/cgroup")) -> Machine:
    """The machine as ``proc`` (``/proc``) and ``cgroup`` (the control
    group file system) describe it."""
    import numba

    cpu, flags = platform.processor() or platform.machine(), set()
    try:
        for line in (proc / "cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and cpu in ("", platform.machine(), platform.processor()):
                cpu = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0))
    return Machine(cpu, tuple(e for e in VECTOR_EXTENSIONS if e in flags), os.cpu_count() or 1, usable,
                   cgroup_quota(cgroup), int(numba.config.NUMBA_NUM_THREADS), os.getloadavg()[0])


def cgroup_quota(root: Path) -> float | None:
    """CPUs' worth of time per second that the control group at ``root``
    allows: cgroup v2's ``cpu.max`` (``"QUOTA PERIOD"`` or ``"max PERIOD"``)
    or v1's ``cpu/cpu.cfs_quota_us`` over ``cpu.cfs_period_us`` (-1: none);
    None when there is no limit or no such file."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return None if quota <= 0 or period <= 0 else quota / period
    except (OSError, ValueError):
        return None


def read_software() -> Software:
    """The versions this process runs."""
    import numba
    import torch

    import slipstream
    from slipstream import native

    cuda = tuple(torch.cuda.get_device_name(k) for k in range(torch.cuda.device_count())) \
        if torch.cuda.is_available() else ()
    return Software(platform.python_version(), slipstream.__version__, f"{native.version()} (ABI "
                    f"{native.abi_version()})", bool(native.video_available()), numba.__version__, torch.__version__,
                    cuda)


def read_caches() -> list[Cache]:
    """The compiled stages' cache and the converted datasets' cache."""
    from slipstream.compiler.codegen import cache_dir
    from slipstream.convert import default_cache_dir

    return [_cache("compiled stages", cache_dir()), _cache("converted datasets", default_cache_dir())]


def _cache(name: str, path: Path) -> Cache:
    size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0
    existing = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
    return Cache(name, path, size, shutil.disk_usage(existing).free)


def speed_check(seconds: float = 5.0, threads: int | None = None) -> Speed:
    """Stream generated 500 x 375 JPEGs through ``presets.imagenet_train(224)``
    for ``seconds`` after one warm-up batch (which compiles the pipeline,
    or loads it from the cache) and return the rate."""
    import numba
    import numpy as np

    import slipstream as ss
    from slipstream.ops import presets
    from slipstream.sources.synthetic import CLASSES, synthetic_image

    threads = threads or int(numba.config.NUMBA_NUM_THREADS)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="slipstream-status-") as folder:
        path = Path(folder) / "photos.slip"
        ss.write(path, {"image": np.stack([synthetic_image(CLASSES[k % len(CLASSES)], rng) for k in range(64)]),
                        "label": np.arange(64) % len(CLASSES)},
                 {"image": ss.RGBImageField(), "label": ss.IntField()}, verbose=False)
        with ss.Loader(path, 32, presets.imagenet_train(224), num_threads=threads, verbose=False) as loader:
            next(iter(loader))
            images, began = 0, time.perf_counter()
            while time.perf_counter() - began < seconds:
                for batch, _ in loader:
                    images += len(batch)
            return Speed(images / (time.perf_counter() - began), threads)


def findings(machine: Machine, software: Software, caches: list[Cache], speed: Speed | None) -> list[Finding]:
    """Every problem the records show, each with its fix."""
    found = []
    if machine.quota is not None and machine.quota < machine.threads:
        cpus = max(1, math.floor(machine.quota))
        found.append(Finding(f"the control group allows {machine.quota:g} CPUs' worth of time, but a loader starts "
                             f"{machine.threads} threads, which then wait for each other",
                             f"export NUMBA_NUM_THREADS={cpus}, or pass num_threads={cpus} to the Loader"))
    if machine.usable < machine.threads:
        found.append(Finding(f"this process may run on {machine.usable} of the {machine.cores} CPUs, but a loader "
                             f"starts {machine.threads} threads",
                             f"export NUMBA_NUM_THREADS={machine.usable}, or pass num_threads={machine.usable}"))
    if platform.machine() in ("x86_64", "AMD64") and "avx2" not in machine.extensions:
        found.append(Finding("this processor has no AVX2: the resampling and conversion kernels and libjpeg-turbo "
                             "run their SSE2 code, about half as fast",
                             "a processor from 2013 or later (Intel Haswell, AMD Excavator) has AVX2"))
    for cache in caches:
        if cache.free < LOW_ROOM:
            found.append(Finding(f"the disk of the {cache.name} cache ({cache.path}) has {human_size(cache.free)} free",
                                 "free room on it, or point SLIPSTREAM_CACHE_DIR at a larger local disk"))
    if speed is not None and speed.images_per_s < SLOW_SHARE * speed.expected:
        busy = f" (load average {machine.load:.1f} on {machine.usable} CPUs)" if machine.load > 0.5 else ""
        found.append(Finding(f"the speed check gave {speed.images_per_s:,.0f} images/s with {speed.threads} "
                             f"threads, under half the {speed.expected:,.0f} this many cores give where nothing "
                             f"else runs{busy}",
                             "look for other processes on these cores (top), a CPU quota or a slow page cache "
                             "disk, and compare with `slipstream bench` on your own dataset"))
    return found


def report(machine: Machine, software: Software, caches: list[Cache], speed: Speed | None) -> str:
    """The one screen ``slipstream status`` prints."""
    quota = "none" if machine.quota is None else f"{machine.quota:g} CPUs"
    extensions = ", ".join(machine.extensions) or "none of " + ", ".join(VECTOR_EXTENSIONS)
    lines = [
        f"cpu        {machine.cpu}; vector extensions: {extensions}",
        f"cores      {machine.cores} logical, {machine.usable} usable by this process, control group quota: {quota}; "
        f"load average {machine.load:.2f}",
        f"threads    a loader starts {machine.threads} (NUMBA_NUM_THREADS), on slipstream's own pool",
        f"software   Python {software.python}, slipstream {software.slipstream}, library {software.library}, "
        f"video {'yes' if software.video else 'no (VideoField needs a build with FFmpeg, or the wheel)'}, "
        f"Numba {software.numba}, torch {software.torch}",
        f"cuda       {', '.join(software.cuda) if software.cuda else 'no CUDA device'}",
    ]
    lines += [f"cache      {c.name}: {c.path}, {human_size(c.size)}; {human_size(c.free)} free on its disk"
              for c in caches]
    if speed is not None:
        lines.append(f"speed      {speed.images_per_s:,.0f} images/s through presets.imagenet_train(224) with "
                     f"{speed.threads} threads (expected about {speed.expected:,.0f} where nothing else runs)")
    found = findings(machine, software, caches, speed)
    lines.append(f"\n{len(found)} problem{'s' if len(found) != 1 else ''} found" + (":" if found else ""))
    lines += [str(f) for f in found]
    return "\n".join(lines)


def main(seconds: float = 5.0, threads: int | None = None) -> int:
    """Print the report (a speed check of ``seconds``; 0: none); the exit
    status is 1 when a problem was found."""
    machine, software, caches = read_machine(), read_software(), read_caches()
    speed = speed_check(seconds, threads) if seconds > 0 else None
    print(report(machine, software, caches, speed))
    return 1 if findings(machine, software, caches, speed) else 0


__all__ = ["Cache", "Finding", "Machine", "Software", "Speed", "cgroup_quota", "findings", "main", "read_caches",
           "read_machine", "read_software", "report", "speed_check"]
