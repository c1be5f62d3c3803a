"""A process limited to one CPU (``taskset -c 0``, a one-CPU container or
SLURM job) runs a loader and exits: its compiled stages run on that one
thread, and no thread pool is left for the interpreter's exit to wait on."""

from __future__ import annotations

import subprocess
import sys
import time

import slipstream as ss
from jpeg_corpus import make_sample

ONE_CPU = """
import os, sys
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # as taskset -c does, before anything starts threads
import slipstream as ss
from slipstream.ops import presets
loader = ss.Loader(sys.argv[1], 8, presets.imagenet_train(32), order="random", verbose=False)
count = sum(len(labels) for _, labels in loader)
print(count, loader.compiled.threads, flush=True)
"""


def test_a_process_on_one_cpu_runs_a_loader_and_exits_at_once(tmp_path):
    path = tmp_path / "photos.slip"
    ss.write(path, [(make_sample(48, 64, seed=k).data, k) for k in range(24)],
             {"image": ss.RGBImageField(), "label": ss.IntField()}, workers=0, verbose=False)
    proc = subprocess.Popen([sys.executable, "-c", ONE_CPU, str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        line = proc.stdout.readline()  # compiling may take a while; exiting must not
        done = time.monotonic()
        proc.wait(timeout=30)
    finally:
        proc.kill()
    assert line.split(" ", 1) == ["24", "1\n"], proc.stderr.read()
    assert proc.returncode == 0 and time.monotonic() - done < 15
