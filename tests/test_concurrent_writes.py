"""Sharded writes into one folder: two processes writing at once both
finish, one after the other, and the folder then holds one of the two
datasets whole; a write removes only the shards it replaced (or, failing,
the ones it wrote), never a user's file that happens to be named like a
shard."""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import slipstream as ss
from slipstream.format import write_lock
from writer_processes import SAMPLES, write, write_rounds

ROUNDS = 5


def user_files(folder: Path, elsewhere: Path) -> dict[str, bytes]:
    """Files of the user's, named like shards, in ``folder``: a text, a
    symbolic link to a file outside, and a slipstream shard of another
    dataset that no manifest of this folder lists."""
    folder.mkdir(exist_ok=True)
    (folder / "shard-00000-deadbeef.slip").write_bytes(b"my notes, not a shard\n")
    (elsewhere / "target.txt").write_bytes(b"a file the link points to\n")
    os.symlink(elsewhere / "target.txt", folder / "shard-00001-cafebabe.slip")
    other = write(elsewhere / "other", 9)
    (folder / "shard-00007-0badf00d.slip").write_bytes((elsewhere / "other" / other.shards[0]).read_bytes())
    return {name: (folder / name).read_bytes() for name in
            ("shard-00000-deadbeef.slip", "shard-00001-cafebabe.slip", "shard-00007-0badf00d.slip")}


def holds_one_dataset_whole(folder: Path) -> int:
    """The writer whose dataset ``folder`` holds, every sample of it read
    and checked."""
    with ss.open_dataset(folder, verify_pages=True) as dataset:
        assert len(dataset) == SAMPLES
        values = {int(dataset.read(i, "y")) for i in range(SAMPLES)}
        assert len(values) == 1, f"samples of both writers: {values}"
        value = values.pop()
        for i in range(0, SAMPLES, 37):
            assert set(np.frombuffer(bytes(dataset.value_bytes(i, "x")), np.uint8)) == {value}
        listed = {shard.name for shard in dataset.manifest.shards}
    leftover = {p.name for p in folder.glob("shard-*.slip")} - listed
    assert leftover == {"shard-00000-deadbeef.slip", "shard-00001-cafebabe.slip", "shard-00007-0badf00d.slip"}, \
        "a replaced shard was left behind, or a user's file removed"
    return value


def test_two_processes_writing_one_folder_at_once_take_turns_and_leave_one_dataset_whole(tmp_path):
    folder = tmp_path / "data"
    mine = user_files(folder, tmp_path)
    ctx = multiprocessing.get_context("spawn")
    start, done, waits = ctx.Barrier(3), ctx.Barrier(3), ctx.Queue()
    writers = [ctx.Process(target=write_rounds, args=(str(folder), value, ROUNDS, start, done, waits))
               for value in (1, 2)]
    for process in writers:
        process.start()
    try:
        seen = []
        for _ in range(ROUNDS):
            start.wait(timeout=120)
            done.wait(timeout=120)
            seen.append(holds_one_dataset_whole(folder))
            assert {name: (folder / name).read_bytes() for name in mine} == mine
            assert not (folder / write_lock.NAME).exists()
        waited = waits.get(timeout=60) + waits.get(timeout=60)
    finally:
        for process in writers:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
    assert [process.exitcode for process in writers] == [0, 0]
    assert set(seen) <= {1, 2}
    assert waited >= 1, "the writers never overlapped, so the test showed nothing: make each write longer"
    assert os.readlink(folder / "shard-00001-cafebabe.slip") == str(tmp_path / "target.txt")


class Failing:
    """Writer 2's samples, the 301st of which cannot be read."""

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        if index == 300:
            raise OSError("sample 300 is on a disk that failed")
        return np.full(3000, 2, np.uint8), 2


def test_a_failed_write_removes_only_the_shards_it_wrote(tmp_path):
    folder = tmp_path / "data"
    mine = user_files(folder, tmp_path)
    first = write(folder, 1)
    with pytest.raises(ss.errors.SlipstreamError, match="was not written.*sample 300"):
        ss.write(folder, Failing(), {"x": ss.NDArrayField(np.uint8, (3000,)), "y": ss.IntField()}, shards=3,
                 overwrite=True, page_size=1 << 14, workers=0, verbose=False)
    assert holds_one_dataset_whole(folder) == 1
    assert sorted(p.name for p in folder.glob("shard-*.slip")) == sorted([*first.shards, *mine])


WAITER = """
import logging, sys
from slipstream.format import write_lock

class Told(logging.Handler):
    def emit(self, record):
        print("waiting", flush=True)

write_lock.log.addHandler(Told())
with write_lock.FolderWriteLock(sys.argv[1]):
    print("held", flush=True)
"""


def test_a_child_forked_during_a_write_does_not_keep_the_folder_locked(tmp_path):
    lock = write_lock.FolderWriteLock(tmp_path)
    lock.acquire()
    child = os.fork()
    if child == 0:  # an encoding worker that outlives the write
        time.sleep(60)
        os._exit(0)
    try:
        waiter = subprocess.Popen([sys.executable, "-c", WAITER, str(tmp_path)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, cwd=tmp_path)  # the installed slipstream
        assert waiter.stdout.readline() == "waiting\n", waiter.stderr.read()  # it opened the lock file, waits on it
        lock.release()
        out, err = waiter.communicate(timeout=30)  # not the child's 60 s
        assert waiter.returncode == 0 and out == "held\n", err
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)


def test_a_second_write_of_this_process_into_a_folder_it_writes_is_refused_naming_it(tmp_path):
    first = write_lock.FolderWriteLock(tmp_path)
    first.acquire()
    with pytest.raises(ss.errors.StorageError, match="being written by this process already"):
        write(tmp_path, 1)
    del first  # an interrupted write dropped without releasing its lock: collecting it lets go
    gc.collect()
    assert write(tmp_path, 1).samples == SAMPLES
