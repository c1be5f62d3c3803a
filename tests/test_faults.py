"""Faults from outside: the dataset file changed under a running loader, a
full disk or a killed worker while writing, a failing pipeline and Ctrl-C
in the middle of an epoch.  Each leaves a clear error and a usable (or
cleanly closed) loader, never a crash, a hang or a half-written file."""

from __future__ import annotations

import _thread
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import jpeg_corpus
import slipstream as ss
from slipstream.compiler import TorchOperation
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
                       os_cache=os_cache, batches_ahead=1, verbose=False)
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
