"""The writer starts its workers safely in a process whose thread pools run.

Each case runs in a fresh interpreter, so that who started Numba's thread
pool, and which threads have run parallel code, is what the case sets up.
The source labels every sample with the process and thread that read it,
so the written file says how the writer encoded; stderr is where Numba's
TBB layer prints "Attempted to fork from a non-main thread" or "Unable to
join threads" when a fork meets a live pool."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2,
                                reason="stages have parallel loops only with two CPUs or more")

CASE = textwrap.dedent("""
    import json, os, sys, threading
    import numpy as np
    import slipstream as ss
    from slipstream.ops import presets

    sys.path.insert(0, {tests!r})
    from jpeg_corpus import make_sample

    class Photos:
        '''24 photos, each labelled with the process and thread that read it.'''
        def __len__(self):
            return 24
        def __getitem__(self, i):
            return make_sample(48, 64, seed=i).data, [os.getpid(), threading.get_ident(), i]

    fields = {{"image": ss.RGBImageField(), "label": ss.NDArrayField(np.dtype("int64"), (3,))}}
    ss.write("first.slip", Photos(), fields, workers=0, verbose=False)

    def epoch():
        loader = ss.Loader("first.slip", 8, presets.imagenet_train(32), order="random", verbose=False)
        return sum(len(labels) for _, labels in loader)

    def write():
        ss.write("second.slip", Photos(), fields, workers=2, verbose=False)

    {steps}

    reader = ss.Reader("second.slip")
    labels = [reader[i]["label"].tolist() for i in range(len(reader))]
    same = all(bytes(reader[i]["image"]) == bytes(ss.Reader("first.slip")[i]["image"]) for i in range(24))
    print(json.dumps({{"pid": os.getpid(), "main": threading.main_thread().ident, "labels": labels,
                      "same_images": same, "after": epoch()}}))
""")


def run_case(tmp_path, steps: str) -> tuple[dict, str]:
    """Run the case with ``steps`` in a fresh interpreter: its report and its stderr."""
    script = CASE.format(tests=os.path.dirname(__file__), steps=textwrap.dedent(steps).strip())
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def check_written(report: dict) -> set[int]:
    """The file holds every sample, in order, with the images of the
    file written without workers; returns the processes that read them."""
    assert [label[2] for label in report["labels"]] == list(range(24))
    assert report["same_images"] and report["after"] == 24  # and a loader still runs afterwards
    return {label[0] for label in report["labels"]}


def check_quiet(stderr: str) -> None:
    """Nothing about forks or TBB was printed."""
    for text in ("fork", "TBB", "Unable to join"):
        assert text not in stderr, stderr


def test_after_a_loader_has_run_the_workers_are_forked_without_a_warning(tmp_path):
    report, stderr = run_case(tmp_path, """
        assert epoch() == 24
        write()
    """)
    readers = check_written(report)
    assert report["pid"] not in readers and len(readers) >= 1  # worker processes read the samples
    check_quiet(stderr)


def test_a_loader_first_run_in_another_thread_still_lets_the_main_thread_fork(tmp_path):
    # The loader's thread would have started Numba's pool, and a pool started by another
    # thread cannot be shut down around a fork from the main thread: the main thread
    # starts it when the loader is built.
    report, stderr = run_case(tmp_path, """
        loader = ss.Loader("first.slip", 8, presets.imagenet_train(32), order="random", verbose=False)
        counted = []
        thread = threading.Thread(target=lambda: counted.append(sum(len(labels) for _, labels in loader)))
        thread.start()
        thread.join()
        assert counted == [24]
        write()
    """)
    assert report["pid"] not in check_written(report)
    check_quiet(stderr)


def test_during_an_epoch_in_another_thread_the_writer_encodes_in_threads(tmp_path):
    # A live thread that has run parallel code keeps TBB from joining its pool before a fork;
    # batches of one keep the loader's thread waiting for room, alive, during the write.
    report, stderr = run_case(tmp_path, """
        loader = ss.Loader("first.slip", 1, presets.imagenet_train(32), order="random", verbose=False)
        iterator = iter(loader)
        next(iterator)
        write()
        iterator.close()
    """)
    assert check_written(report) == {report["pid"]}
    assert report["main"] not in {label[1] for label in report["labels"]}  # threads of the writer read them
    check_quiet(stderr)


def test_a_write_from_another_thread_after_a_loader_encodes_in_threads(tmp_path):
    report, stderr = run_case(tmp_path, """
        assert epoch() == 24
        thread = threading.Thread(target=write)
        thread.start()
        thread.join()
    """)
    assert check_written(report) == {report["pid"]}
    check_quiet(stderr)


def test_a_pool_started_by_another_thread_is_never_forked(tmp_path):
    # Parallel code run first in a thread of the user's (not through a loader):
    # the pool's owner is that thread, so no fork can shut the pool down.
    report, stderr = run_case(tmp_path, """
        import numba

        @numba.njit(parallel=True)
        def total(values):
            s = 0.0
            for i in numba.prange(values.size):
                s += values[i]
            return s

        thread = threading.Thread(target=total, args=(np.ones(1000),))
        thread.start()
        thread.join()
        write()
    """)
    assert check_written(report) == {report["pid"]}
    check_quiet(stderr)

