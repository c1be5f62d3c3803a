"""Distributed sharding with real torch.distributed: 2 processes, the gloo
backend on 127.0.0.1, each with its own loader, for every order."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import slipstream as ss

WORKER = textwrap.dedent("""
    import json, sys
    import torch.distributed as dist
    import slipstream as ss

    path, port, rank, drop_last = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    result = {}
    for order in ("sequential", "random", "quasi_random"):
        loader = ss.Loader(path, 8, {"image": None}, order=ss.Order(order, seed=4),
                           sharding=ss.Sharding(drop_last=drop_last))  # distributed=None
        assert (loader.rank, loader.world_size) == (rank, 2)
        result[order] = [[b[0].tolist() for b in loader] for _ in range(2)]  # two epochs
        result[order + "/len"] = len(loader)
    dist.barrier()
    dist.destroy_process_group()
    print(json.dumps(result))
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("dist") / "d.slip"
    images = np.zeros((101, 4, 4, 3), np.uint8)
    ss.write(path, {"image": images, "label": np.arange(101)}, {"image": ss.RGBImageField(write_mode="raw"),
                                                                "label": ss.IntField()},
             workers=0, page_size=4096, verbose=False)
    return path


def launch_ranks(script: str, arguments: list[list[str]], cwd, env=None) -> list[dict]:
    """Run ``script`` once per rank (``arguments[rank]`` after the program name), at once; each
    must succeed and print a JSON object on its last line: the objects, by rank."""
    procs = [subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, cwd=cwd, env=env)
             for args in arguments]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def run_ranks(path, drop_last: bool, tmp_path) -> list[dict]:
    port = str(free_port())
    return launch_ranks(WORKER, [[str(path), port, str(rank), str(int(drop_last))] for rank in range(2)], tmp_path)


@pytest.mark.parametrize("drop_last", [False, True])
def test_shards_are_disjoint_equal_and_complete(dataset, tmp_path, drop_last):
    ranks = run_ranks(dataset, drop_last, tmp_path)
    for order in ("sequential", "random", "quasi_random"):
        epochs = [[sum(r[order][e], []) for r in ranks] for e in range(2)]
        for shard_0, shard_1 in epochs:
            if drop_last:  # 101 samples: 50 per rank, whole batches of 8 only
                assert len(shard_0) == len(shard_1) == 48
                assert not set(shard_0) & set(shard_1)
            else:  # padded to 102: 51 each, one sample repeated
                assert len(shard_0) == len(shard_1) == 51
                assert set(shard_0) | set(shard_1) == set(range(101))
                assert len(set(shard_0) & set(shard_1)) <= 1 and len(set(shard_0)) == len(shard_0)
            assert len(set(shard_0)) == len(shard_0) and len(set(shard_1)) == len(shard_1)
        assert ranks[0][order + "/len"] == ranks[1][order + "/len"] == (6 if drop_last else 7)
        if order != "sequential":  # shards change with the epoch
            assert epochs[0][0] != epochs[1][0]
