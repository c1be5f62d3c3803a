"""Functions the concurrency tests run in other processes (importable by
name, as torch.multiprocessing.spawn and DataLoader workers need)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

import slipstream as ss
from slipstream.ops import CenterCrop, RandomResizedCrop


def rank_main(rank: int, path: str, port: int, world_size: int, out: str) -> None:
    """One rank of torch.multiprocessing.spawn: join a gloo group, load two
    epochs of its shard, write the labels and a pixel checksum per batch."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    try:
        with ss.Loader(path, 8, {"image": [RandomResizedCrop(24)]}, order=ss.Order("random", seed=1)) as loader:
            epochs = [[(labels.tolist(), int(images.sum())) for images, labels in loader] for _ in range(2)]
        dist.barrier()
    finally:
        dist.destroy_process_group()
    Path(out, f"rank{rank}.json").write_text(json.dumps(epochs))


class ParentLoaderDataset(torch.utils.data.Dataset):
    """Samples taken from a slipstream Loader made in the parent process."""

    def __init__(self, loader: ss.Loader) -> None:
        self.loader = loader

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int):
        images, labels = next(iter(self.loader))
        return labels[index % len(labels)]


class OwnLoaderDataset(torch.utils.data.Dataset):
    """Samples from a slipstream Loader each worker process makes for itself."""

    def __init__(self, path: str) -> None:
        self.path, self.loader = path, None

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int):
        if self.loader is None:
            self.loader = ss.Loader(self.path, 4, {"image": [CenterCrop(16)]}, order="sequential", verbose=False)
        images, labels = next(iter(self.loader))
        return torch.tensor([os.getpid(), int(labels[index])])
