"""The writer starts its workers safely in a process whose thread pools run.

Whether Numba's thread pool runs is state of the whole process, so the
cases run in fresh interpreters, one after another in each: slipstream's
loaders start no Numba pool (their stages run on threads of their own,
which a forked child forgets), so the writer forks its workers before,
during and after an epoch and from any thread; a pool started by parallel
Numba code of the user's gets an interpreter of its own, where the writer
encodes in threads.  The source labels every sample with the process and
thread that read it, so each written file says how the writer encoded;
stderr is where Numba's TBB layer prints "Attempted to fork from a non-main
thread" or "Unable to join threads" when a fork meets a live pool."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2,
                                reason="stages run on several threads only with two CPUs or more")

PREAMBLE = textwrap.dedent("""
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
        ss.write(case + ".slip", Photos(), fields, workers=2, verbose=False)

    def report():
        reader, first = ss.Reader(case + ".slip"), ss.Reader("first.slip")
        labels = [reader[i]["label"].tolist() for i in range(len(reader))]
        same = all(bytes(reader[i]["image"]) == bytes(first[i]["image"]) for i in range(24))
        return {{"labels": labels, "same_images": same, "after": epoch()}}

    reports = {{}}
""")

CASE = textwrap.dedent("""
    case = {name!r}
    print("--- case " + case, file=sys.stderr, flush=True)
    {steps}
    reports[case] = report()
""")

EXIT = "--- exit"
"""Printed to stderr after the last case: what follows comes from the interpreter's exit."""

EPILOGUE = textwrap.dedent(f"""
    print(json.dumps({{"pid": os.getpid(), "main": threading.main_thread().ident, "reports": reports}}))
    print({EXIT!r}, file=sys.stderr, flush=True)
""")

LOADER_IN_A_THREAD = """
    # The loader's thread would have started Numba's pool, and a pool started by another
    # thread cannot be shut down around a fork from the main thread: the main thread
    # starts it when the loader is built.
    loader = ss.Loader("first.slip", 8, presets.imagenet_train(32), order="random", verbose=False)
    counted = []
    thread = threading.Thread(target=lambda: counted.append(sum(len(labels) for _, labels in loader)))
    thread.start()
    thread.join()
    assert counted == [24]
    write()
    loader.close()
"""

AFTER_A_LOADER = """
    assert epoch() == 24
    write()
"""

WRITE_FROM_A_THREAD = """
    assert epoch() == 24
    thread = threading.Thread(target=write)
    thread.start()
    thread.join()
"""

DURING_AN_EPOCH = """
    # Batches of one keep the loader's thread waiting for room, alive, during the write, with the
    # threads its stage ran on.
    loader = ss.Loader("first.slip", 1, presets.imagenet_train(32), order="random", verbose=False)
    iterator = iter(loader)
    next(iterator)
    write()
    iterator.close()
"""

POOL_OF_A_THREAD = """
    # Parallel code run first in a thread of the user's (not through a loader):
    # the pool's owner is that thread, so no fork can shut the pool down.
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
"""

INTERPRETERS = {
    # The case that leaves a live loader thread goes last.
    "main": {"loader_in_a_thread": LOADER_IN_A_THREAD, "write_from_a_thread": WRITE_FROM_A_THREAD,
             "after_a_loader": AFTER_A_LOADER, "during_an_epoch": DURING_AN_EPOCH},
    "pool_of_a_thread": {"pool_of_a_thread": POOL_OF_A_THREAD},
}


def run_cases(folder, cases: dict[str, str]) -> tuple[dict, str]:
    """Run ``cases`` (name: steps), in order, in one fresh interpreter: its
    report and its stderr."""
    script = PREAMBLE.format(tests=os.path.dirname(__file__))
    for name, steps in cases.items():
        script += CASE.format(name=name, steps=textwrap.dedent(steps).strip()) + "\n"
    script += EPILOGUE
    proc = subprocess.run([sys.executable, "-c", script], cwd=folder, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[dict, str]]:
    """Each interpreter's report and stderr, run once for the module."""
    return {name: run_cases(tmp_path_factory.mktemp(name), cases) for name, cases in INTERPRETERS.items()}


def case_of(runs: dict[str, tuple[dict, str]], name: str) -> tuple[dict, str]:
    """The report of case ``name`` (with the interpreter's pid and main
    thread) and what its interpreter printed to stderr during the case and
    at exit."""
    (report, stderr), = [runs[interpreter] for interpreter, cases in INTERPRETERS.items() if name in cases]
    during = stderr.split(f"--- case {name}\n", 1)[1].split("--- ", 1)[0]
    at_exit = stderr.split(EXIT, 1)[1]
    return {"pid": report["pid"], "main": report["main"], **report["reports"][name]}, during + at_exit


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


def test_after_a_loader_has_run_the_workers_are_forked_without_a_warning(runs):
    report, stderr = case_of(runs, "after_a_loader")
    readers = check_written(report)
    assert report["pid"] not in readers and len(readers) >= 1  # worker processes read the samples
    check_quiet(stderr)


def test_a_loader_first_run_in_another_thread_still_lets_the_main_thread_fork(runs):
    report, stderr = case_of(runs, "loader_in_a_thread")
    assert report["pid"] not in check_written(report)
    check_quiet(stderr)


def test_during_an_epoch_in_another_thread_the_workers_are_forked(runs):
    report, stderr = case_of(runs, "during_an_epoch")
    assert report["pid"] not in check_written(report)
    check_quiet(stderr)


def test_a_write_from_another_thread_after_a_loader_forks_its_workers(runs):
    report, stderr = case_of(runs, "write_from_a_thread")
    assert report["pid"] not in check_written(report)
    check_quiet(stderr)


def test_a_pool_started_by_another_thread_is_never_forked(runs):
    report, stderr = case_of(runs, "pool_of_a_thread")
    assert check_written(report) == {report["pid"]}
    check_quiet(stderr)


def test_a_write_in_a_daemonic_pool_worker_encodes_on_threads_and_says_so(tmp_path):
    import multiprocessing

    from writer_processes import write_in_pool_worker

    with multiprocessing.get_context("spawn").Pool(1) as pool:  # a task whose worker died would be waited for
        samples, messages = pool.apply_async(write_in_pool_worker, (str(tmp_path),)).get(timeout=120)
    assert samples == 1000
    assert any("daemonic process" in m and "2 threads" in m for m in messages), messages
