"""A node lost in the middle of a conversion on Ray: the encoded samples it
held are rebuilt by Ray re-running the tasks that made them (lineage
reconstruction), and the dataset has the bytes of an undisturbed write.

The cluster is this module's own: a head node without CPUs (the driver's)
and one worker node, which is removed while the last block is still being
read, after the earlier blocks were encoded there, and replaced by a new one.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from pathlib import Path

import pytest

import slipstream as ss

ray = pytest.importorskip("ray")
import slipstream.ray as ssray  # noqa: E402
from ray_cluster import local_cluster  # noqa: E402
from test_sources import jpegs  # noqa: E402

cloudpickle = pytest.importorskip("ray.cloudpickle")
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray's workers cannot import the test modules

ROWS = 600
BLOCKS = 4
"""Blocks of 150 rows: their parts (about 200 KB) go to the node's object store (Ray keeps objects under
100 KB with their owner, the driver)."""


@pytest.fixture()
def cluster(tmp_path):
    """This test's cluster: a head node without CPUs and a worker node with 2."""
    with local_cluster(tmp_path, head_cpus=0, node_cpus=2) as nodes:
        yield nodes


def counting_label(log: str) -> ss.IntField:
    """An ``IntField`` (stored as one) that notes in the file ``log`` each
    time it encodes label 0, so that the test can see the task re-run."""

    class CountsItsEncodings(ss.IntField):
        def encode(self, value):
            if value == 0:
                with open(log, "a") as file:
                    file.write(f"{os.getpid()}\n")
            return super().encode(value)

    return CountsItsEncodings()


def test_a_node_lost_mid_write_is_rebuilt_and_the_bytes_are_the_same(cluster, tmp_path):
    rows = [{"image": data, "label": k} for k, data in enumerate(jpegs(ROWS, seed=5))]
    marker, log = str(tmp_path / "last-block-started"), str(tmp_path / "encodings")

    def slow_last_block(batch):
        if ROWS - 1 in batch["label"] and not os.path.exists(marker):
            open(marker, "w").close()
            time.sleep(30)  # ended by the node's removal
        return batch

    doomed = cluster.list_all_nodes()[1]
    dataset = ray.data.from_items(rows, override_num_blocks=BLOCKS).map_batches(slow_last_block, batch_format="numpy")
    # The JPEGs as they are: block 0 must be encoded, and its part kept, before the last block starts.
    fields = {"image": ss.RGBImageField(tile_width=None), "label": counting_label(log)}
    done: dict = {}
    writer = threading.Thread(target=lambda: done.update(result=ssray.write(
        dataset, str(tmp_path / "ray"), fields, page_size=4096, shard_size="1GB")))
    writer.start()
    deadline = time.monotonic() + 120
    while not (os.path.exists(marker) and os.path.exists(log)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert os.path.exists(marker) and os.path.exists(log), "the last block was never read, or block 0 never encoded"
    assert Path(log).read_text().count("\n") == 1  # block 0 encoded once, on the node about to go
    cluster.remove_node(doomed)  # its object store, and every part in it, with it
    cluster.add_node(num_cpus=2)
    writer.join(timeout=300)
    assert not writer.is_alive() and "result" in done
    assert done["result"].samples == ROWS
    assert Path(log).read_text().count("\n") == 2  # block 0's part was rebuilt by encoding it again

    local = ss.write(tmp_path / "local", rows, {"image": ss.RGBImageField(tile_width=None), "label": ss.IntField()},
                     page_size=4096, shard_size="1GB", workers=0, verbose=False)
    assert done["result"].shards == local.shards

    def digests(folder):
        return {n: hashlib.sha256((folder / n).read_bytes()).hexdigest() for n in sorted(os.listdir(folder))}

    assert digests(tmp_path / "ray") == digests(tmp_path / "local")
