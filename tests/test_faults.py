"""Faults from outside: the dataset file changed under a running loader
(between batches, and while a batch decodes from it), a full disk, a killed
worker or a killed writing process, a failing pipeline and Ctrl-C in the
middle of an epoch.  Each leaves a clear error and a usable (or cleanly
closed) loader, never a crash, a hang, an orphaned process or a
half-written file."""

from __future__ import annotations

import _thread
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import jpeg_corpus
import slipstream as ss
from slipstream.compiler import TorchOperation
from slipstream.format import tempfiles
from slipstream.ops import CenterCrop

BATCH = 8


@pytest.fixture()
def dataset(tmp_path):
    images = [jpeg_corpus.picture(40, 48, seed=i) for i in range(64)]
    path = tmp_path / "faults.slip"
    ss.write(path, [(img, i) for i, img in enumerate(images)], {"image": ss.RGBImageField(), "label": ss.IntField()},
             page_size=4096, workers=0, verbose=False)
    return path


class Gate:
    """A torch stage that holds the loader thread at the start of batch
    ``at`` until released: the thread then has decoded that batch and
    touches no file page, so the test can change the file safely."""

    def __init__(self, at: int) -> None:
        self.at, self.calls = at, 0
        self.reached, self.release = threading.Event(), threading.Event()

    def __call__(self, batch):
        if batch.shape[0] == BATCH:  # not the one-sample probe run before the first batch
            if self.calls == self.at:
                self.reached.set()
                assert self.release.wait(30), "the test never released the gate"
            self.calls += 1
        return batch


def loader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("slipstream-loader")]


def change_from_another_process(path, how: str) -> None:
    script = {"truncate": f"import os; os.truncate({str(path)!r}, os.path.getsize({str(path)!r}) // 2)",
              "replace": f"import os, shutil; shutil.copy({str(path)!r}, {str(path)!r} + '.new'); "
                         f"os.replace({str(path)!r} + '.new', {str(path)!r})"}[how]
    subprocess.run([sys.executable, "-c", script], check=True)


@pytest.mark.parametrize("os_cache", [False, True], ids=["pread", "mapped"])
@pytest.mark.parametrize("how", ["truncate", "replace"])
def test_the_file_changed_mid_epoch_raises_naming_it(dataset, os_cache, how):
    gate = Gate(at=2)
    loader = ss.Loader(dataset, BATCH, {"image": [CenterCrop(32), TorchOperation(gate)]}, order="sequential",
                       verbose=False, memory=ss.Memory(os_cache=os_cache, batches_ahead=1))
    it = iter(loader)
    next(it)
    assert gate.reached.wait(30)
    change_from_another_process(dataset, how)
    gate.release.set()
    what = "changed size" if how == "truncate" else "was replaced by another file"
    with pytest.raises(ss.FormatError, match=rf"faults.slip {what}"):
        for _ in it:
            pass
    assert not loader_threads()
    with pytest.raises(ss.FormatError):  # the reader keeps saying so; nothing crashes
        loader.reader.verify()
    loader.close()


def test_a_replaced_file_opens_again(dataset):
    with ss.Loader(dataset, BATCH, {"image": [CenterCrop(32)]}, verbose=False) as loader:
        change_from_another_process(dataset, "replace")
        with pytest.raises(ss.FormatError, match="replaced"):
            list(loader)
    with ss.Loader(dataset, BATCH, {"image": [CenterCrop(32)]}, verbose=False) as loader:
        assert sum(len(labels) for _, labels in loader) == 64


def test_the_reader_verifies_an_unchanged_file(dataset):
    with ss.Reader(dataset) as reader:
        reader.verify()
        os.utime(dataset, ns=(1, 1))
        with pytest.raises(ss.FormatError, match="was modified since it was opened"):
            reader.verify()


def test_a_full_disk_leaves_no_file_at_the_target(tmp_path):
    """RLIMIT_FSIZE makes every write past 300 kB fail with EFBIG, as a full disk fails with ENOSPC."""
    script = textwrap.dedent(f"""
        import resource, sys
        import numpy as np
        import slipstream as ss
        resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))
        rows = np.stack([np.full((100, 100, 3), i, np.uint8) for i in range(64)])  # 30 kB each, raw
        try:
            ss.write({str(tmp_path / 'big.slip')!r}, rows, {{"image": ss.RGBImageField("raw")}}, workers=2,
                     page_size=65536, verbose=False)
        except OSError as exc:
            print("OSError", exc)
            sys.exit(3)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "big.slip was not written: File too large" in done.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("step", ["flock", "fstat", "fdopen"])
def test_ctrl_c_while_a_temporary_file_is_created_leaves_none(tmp_path, monkeypatch, step):
    """Ctrl-C between creating a writer's temporary file and handing it over
    (the window a SIGINT hit in the CLI's test) removes it: nobody else
    knows its name."""
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(tempfiles.fcntl if step == "flock" else tempfiles.os, step, interrupted)
    with pytest.raises(KeyboardInterrupt):
        tempfiles.create(tmp_path / "data.slip")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
    path, file = tempfiles.create(tmp_path / "data.slip")  # and the next writer still gets one
    file.close()
    assert list(tmp_path.iterdir()) == [path]


class KillsItsWorker:
    """A source whose sample 40 kills the worker process encoding it."""

    def __init__(self) -> None:
        self.parent = os.getpid()

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int):
        if index == 40 and os.getpid() != self.parent:
            os.kill(os.getpid(), 9)
        return (np.full((16, 16, 3), index, np.uint8),)

    def describe(self, index: int) -> str:
        return f"sample {index}"


def test_a_killed_writer_worker_fails_the_write(tmp_path):
    target = tmp_path / "killed.slip"
    with pytest.raises(ss.SlipstreamError, match="killed.slip was not written: a writer worker process died while "
                                                 "encoding samples"):
        ss.write(target, KillsItsWorker(), {"image": ss.RGBImageField()}, workers=2, verbose=False)
    assert list(tmp_path.iterdir()) == []


class FailsOnce:
    """A torch stage that raises in batch 3 of the first epoch it sees."""

    def __init__(self) -> None:
        self.calls, self.failed = 0, False

    def __call__(self, batch):
        if batch.shape[0] == BATCH:
            self.calls += 1
            if self.calls == 4 and not self.failed:
                self.failed = True
                raise RuntimeError("augmentation blew up")
        return batch


def test_a_pipeline_exception_mid_epoch_leaves_the_loader_usable(dataset):
    with ss.Loader(dataset, BATCH, {"image": [CenterCrop(32), TorchOperation(FailsOnce())]}, order="sequential",
                   verbose=False) as loader:
        seen = []
        with pytest.raises(ss.PipelineError, match=r"faults.slip: batch 3 of epoch 0 .* augmentation blew up"):
            for _, labels in loader:
                seen.append(labels.clone())
        assert len(seen) == 3 and not loader_threads()
        assert torch_cat(label for _, label in loader).tolist() == list(range(64))  # the next epoch is whole
    assert not loader_threads()


def test_ctrl_c_mid_epoch_leaves_the_loader_usable(dataset):
    with ss.Loader(dataset, BATCH, {"image": [CenterCrop(32)]}, order="sequential", verbose=False) as loader:
        taken = 0
        with pytest.raises(KeyboardInterrupt):
            for _ in loader:
                taken += 1
                if taken == 3:
                    _thread.interrupt_main()  # as Ctrl-C does: delivered to the main thread between bytecodes
                    for _ in range(10_000_000):
                        pass
        assert taken == 3
        loader.set_epoch(5)
        assert torch_cat(label for _, label in loader).tolist() == list(range(64))
        state = loader.state_dict()
        assert state["epoch"] == 6 and state["batch"] == 0
    assert not loader_threads()


def torch_cat(tensors):
    """Batches joined, each cloned as it comes (a batch's memory is reused a few batches later)."""
    import torch

    return torch.cat([t.clone() for t in tensors])


# ---------------------------------------------------------------- the file changed during a batch


def rewrite_in_place(path, other) -> None:
    """What `cp other path` does: truncate the file to nothing, then write."""
    with open(other, "rb") as src, open(path, "r+b") as dst:
        dst.truncate(0)
        while chunk := src.read(1 << 16):
            dst.write(chunk)


@pytest.fixture(scope="module")
def big_pair(tmp_path_factory):
    """Two datasets of the same shape, large enough that an epoch takes a
    while: many batches, raw images whose copies touch every page."""
    folder = tmp_path_factory.mktemp("big")
    paths = []
    for seed, name in ((0, "train.slip"), (1, "other.slip")):
        rows = np.random.default_rng(seed).integers(0, 256, (3000, 48, 48, 3), dtype=np.uint8)
        path = folder / name
        ss.write(path, (rows, np.arange(3000)), {"image": ss.RGBImageField(write_mode="raw"), "label": ss.IntField()},
                 page_size=1 << 16, workers=0, verbose=False)
        paths.append(path)
    return paths


@pytest.mark.parametrize("os_cache", [True, False], ids=["mapped", "pread"])
@pytest.mark.parametrize("how", ["truncate", "rewrite in place"])
def test_a_file_changed_while_batches_decode_raises_and_the_process_survives(big_pair, tmp_path, os_cache, how):
    """The change lands at several moments of a running epoch, mostly while a
    batch is being decoded from the file: each time the loader raises
    FormatError naming the file (a mapped page past a truncated end would
    otherwise end this process with SIGBUS)."""
    source, other = big_pair
    for delay in (0.0, 0.002, 0.01, 0.03, 0.08):
        path = tmp_path / f"train-{delay}.slip"
        path.write_bytes(source.read_bytes())
        loader = ss.Loader(path, 64, {"image": [CenterCrop(40)]}, order="random", verbose=False,
                           memory=ss.Memory(os_cache=os_cache))
        list(loader)  # compiled, warm
        change = threading.Timer(delay, lambda p=path: os.truncate(p, os.path.getsize(p) // 3) if how == "truncate"
                                 else rewrite_in_place(p, other))
        with pytest.raises(ss.FormatError, match=rf"train-{delay}.slip (changed size|was modified|was truncated)"):
            change.start()
            for _ in range(20):
                for _ in loader:
                    pass
        change.join()
        loader.close()
        assert not loader_threads()


# ---------------------------------------------------------------- writers killed


class Slow:
    """A source that notes each worker process it runs in and takes its time."""

    def __init__(self, folder) -> None:
        self.folder = folder

    def __len__(self) -> int:
        return 4000

    def __getitem__(self, index: int):
        (self.folder / f"worker-{os.getpid()}").touch()
        time.sleep(0.005)
        return (np.full((8, 8, 3), index % 256, np.uint8),)

    def describe(self, index: int) -> str:
        return f"sample {index}"


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill -9", "kill -15"])
def test_a_killed_writer_leaves_no_worker_and_the_next_write_no_stale_file(tmp_path, sig):
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from pathlib import Path
        import slipstream as ss
        from test_faults import Slow
        ss.write(Path("out") / "data.slip", Slow(Path("workers")), {{"image": ss.RGBImageField("raw")}}, workers=2,
                 verbose=False)
    """)
    (tmp_path / "out").mkdir()
    (tmp_path / "workers").mkdir()
    writer = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path)
    deadline = time.monotonic() + 60
    while len(list((tmp_path / "workers").iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = [int(p.name.split("-")[1]) for p in (tmp_path / "workers").iterdir()]
    assert len(workers) == 2 and all(alive(pid) for pid in workers)
    writer.send_signal(sig)
    assert writer.wait(30) == -sig
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in workers), "a writer worker outlived its parent by 5 s"
    stale = list((tmp_path / "out").glob(".data.slip.*.tmp"))
    assert len(stale) == 1 and not (tmp_path / "out" / "data.slip").exists()

    running = tempfiles.create(tmp_path / "out" / "data.slip")  # a writer still at work: its file must stay
    unrelated = tmp_path / "out" / ".other.slip.123-abcd.tmp"
    unrelated.touch()
    ss.write(tmp_path / "out" / "data.slip", [(1,)], {"x": ss.IntField()}, workers=0, verbose=False)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        ["data.slip", running[0].name, unrelated.name])
    running[1].close()


def test_a_worker_without_prctl_watches_its_parent(tmp_path):
    """The fallback where the kernel cannot be asked (not Linux): a thread
    that ends the worker once its parent is gone."""
    script = textwrap.dedent("""
        import os, sys, threading, time
        from slipstream.format.writer import _exit_when_orphaned
        parent = os.getpid()
        child = os.fork()
        if child == 0:
            threading.Thread(target=_exit_when_orphaned, args=(parent, 0.05), daemon=True).start()
            time.sleep(60)
            os._exit(0)
        print(child, flush=True)
        os._exit(0)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    child = int(done.stdout)
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)
