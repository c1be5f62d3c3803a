"""What a training step receives: ImageNet-train batches on the device,
feeding nothing, a real training step, and the same step on synthetic
device tensors (the GPU's ceiling), for slipstream and for the PyTorch
DataLoader + Pillow on the same JPEG bytes.

Usage::

    python benchmarks/training_step.py DATASET [--device cuda] [--model resnet50] [--batch-size 256]
                                       [--workers N] [--rounds 3] [--seconds 3] [--json PATH]

DATASET is a folder written by ``benchmarks/gpu_data.py`` (``data.slip``
and ``samples.json``: the same JPEG bytes for both systems).

Feeders (both give float16 NCHW images normalized with ImageNet's mean and
standard deviation, and int64 labels, on ``--device``):

``slipstream``
    ``Loader(data.slip, presets.imagenet_train(224), order="random",
    device=DEVICE)``: batches copied to the device on the loader's side
    stream from pinned memory, all cores.
``dataloader``
    ``torch.utils.data.DataLoader`` over the files, ``--workers`` worker
    processes (default: all cores), ``pin_memory``, persistent workers, the
    DataLoader peer's Pillow decode and RandomResizedCrop + flip +
    normalize (``benchmarks/peers/dataloader_runner.py``); the training loop
    moves each batch with ``.to(device, non_blocking=True)``, as the
    PyTorch ImageNet example does.

Consumers:

``nothing``
    the loop only takes batches (the loader's rate on the device);
``step``
    one training step of ``--model`` (``resnet50``: torchvision's
    ResNet-50; ``tiny``: a small convolutional network, for machines
    without torchvision or a GPU): channels_last, bf16 autocast, forward,
    cross-entropy, backward, SGD with momentum;
``ceiling``
    the same step on one batch of random device tensors, no loader: the
    rate the GPU allows.

Both drop an epoch's last, partial batch, so that every step has the same
shape (a new shape would have cuDNN choose its algorithms again, inside a
measurement).  Each measurement starts a fresh iterator, takes ``--warmup`` batches
untimed, then times batches until ``--seconds`` have passed (the device
synchronized at both ends).  Rounds interleave every (feeder, consumer)
pair and the ceiling; the table gives medians and ranges.  The GPU's wait
for data is ``1 - rate / ceiling`` (the share of the time the step's
compute would have needed that went by without it); the host's wait is the
share of the loop's time spent inside ``next()``.  On a 2-core machine
timings drift 10-40% from run to run; compare ratios within one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))  # the DataLoader peer's decode and augmentation

from common import record, summary  # noqa: E402  (benchmarks/, next to this file)
from gpu_data import load_samples  # noqa: E402

CLASSES = 1000
FEEDERS = ("slipstream", "dataloader")
CONSUMERS = ("nothing", "step")


def tiny_model() -> torch.nn.Module:
    """A small convolutional classifier with batch norm, for a step that
    runs anywhere in a fraction of a second."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 7, stride=4, padding=3), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, CLASSES))


def make_model(name: str) -> torch.nn.Module:
    if name == "tiny":
        return tiny_model()
    if name == "resnet50":
        import torchvision

        return torchvision.models.resnet50(num_classes=CLASSES)
    raise SystemExit(f"unknown model {name!r}: resnet50 or tiny")


class TrainingStep:
    """One step of SGD on ``model``: channels_last, bf16 autocast, forward,
    cross-entropy, backward, update; nothing waits for the device."""

    def __init__(self, model: torch.nn.Module, device: torch.device) -> None:
        self.device = device
        self.model = model.to(device, memory_format=torch.channels_last).train()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
        self.loss = torch.nn.CrossEntropyLoss()

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        images = images.contiguous(memory_format=torch.channels_last)
        with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16):
            loss = self.loss(self.model(images), labels)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class SlipstreamFeeder:
    """Batches of the slipstream file, on the device."""

    def __init__(self, folder: Path, batch_size: int, device: torch.device) -> None:
        import slipstream as ss
        from slipstream.ops import presets

        self.loader = ss.Loader(folder / "data.slip", batch_size, presets.imagenet_train(224),
                                order=ss.Order("random", seed=0), sharding=ss.Sharding(drop_last=True),
                                device=device, verbose=False)
        self.settings = {"pipeline": "RandomResizedCrop(224), RandomHorizontalFlip(), Normalize(float16)",
                         "order": "random", "drop_last": True, "threads": self.loader.num_threads or "all cores",
                         "device": str(device), "copies": "loader side stream, pinned slots"}

    def batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:
            for images, labels in self.loader:
                yield images, labels

    def close(self) -> None:
        self.loader.close()


class DataLoaderFeeder:
    """Batches of the same files through the DataLoader peer's Pillow
    pipeline, moved to the device by the training loop."""

    def __init__(self, folder: Path, batch_size: int, device: torch.device, workers: int) -> None:
        from dataloader_runner import FolderDataset, worker_init, shutdown_workers
        from torch.utils.data import DataLoader

        self.device, self._shutdown = device, shutdown_workers
        pin = device.type == "cuda"
        self.loader = DataLoader(FolderDataset(load_samples(folder), "train"), batch_size=batch_size, shuffle=True,
                                 num_workers=workers, pin_memory=pin, drop_last=True,
                                 persistent_workers=workers > 0, worker_init_fn=worker_init if workers else None)
        # The workers start now, before any parallel slipstream code runs in
        # this process: a fork while Numba's thread pool is running may leave
        # a child with a pool it cannot use.  Persistent, they serve every
        # later iteration.
        iter(self.loader)
        self.settings = {"num_workers": workers, "pin_memory": pin, "persistent_workers": workers > 0,
                         "drop_last": True, "prefetch_factor": 2 if workers else None, "worker_torch_threads": 1,
                         "decoder": "PIL Image.open(path).convert('RGB')",
                         "pipeline": "RandomResizedCrop(224) sampling, Image.resize BILINEAR with box, flip, "
                                     "normalize to float16 (benchmarks/peers/dataloader_runner.py)",
                         "copies": ".to(device, non_blocking=True) in the training loop"}

    def batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        blocking = self.device.type != "cuda"
        while True:
            for images, labels, _tag in self.loader:
                yield (images.to(self.device, non_blocking=not blocking),
                       labels.to(self.device, non_blocking=not blocking))

    def close(self) -> None:
        self._shutdown(self.loader)


def measure(batches: Iterator[tuple[torch.Tensor, torch.Tensor]], consume: Callable[[Any, Any], None] | None,
            device: torch.device, warmup: int, seconds: float) -> dict[str, float]:
    """Images/s over the batches taken after ``warmup`` until ``seconds``
    have passed, and the share of that time spent waiting in ``next()``."""
    for _ in range(warmup):
        images, labels = next(batches)
        if consume is not None:
            consume(images, labels)
    synchronize(device)
    start = time.perf_counter()
    waited, count, steps = 0.0, 0, 0
    while True:
        before = time.perf_counter()
        images, labels = next(batches)
        waited += time.perf_counter() - before
        if consume is not None:
            consume(images, labels)
        count += labels.shape[0]
        steps += 1
        if time.perf_counter() - start >= seconds and steps >= 3:
            break
    synchronize(device)
    took = time.perf_counter() - start
    return {"images_per_s": count / took, "host_wait_fraction": waited / took, "images": count, "seconds": took}


def same_outputs(feeders: dict[str, Any], device: torch.device) -> str:
    """What every feeder's batches are (shape, dtype, device of images and
    labels), checked to be the same for all: the step must receive the same
    thing from each."""
    seen = {}
    for name, feeder in feeders.items():
        batches = feeder.batches()
        try:
            images, labels = next(batches)
        finally:
            batches.close()
        seen[name] = (f"images {tuple(images.shape)} {images.dtype} on {images.device.type}, "
                      f"labels {tuple(labels.shape)} {labels.dtype} on {labels.device.type}")
    if len(set(seen.values())) != 1 or images.device.type != device.type:
        raise SystemExit(f"the feeders' batches differ: {seen}")
    return seen[name]


def ceiling_batches(batch_size: int, device: torch.device) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """One batch of random device tensors, forever."""
    generator = torch.Generator(device="cpu").manual_seed(0)
    images = torch.randn(batch_size, 3, 224, 224, generator=generator).to(device, torch.float16)
    labels = torch.randint(0, CLASSES, (batch_size,), generator=generator).to(device)
    while True:
        yield images, labels


def run(folder: Path, device: torch.device, model_name: str, batch_size: int, workers: int, rounds: int,
        seconds: float, warmup: int, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every measurement, ``rounds`` times interleaved; the report."""
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    dataloader = DataLoaderFeeder(folder, batch_size, device, workers)  # first: see its constructor
    feeders: dict[str, Any] = {"slipstream": SlipstreamFeeder(folder, batch_size, device), "dataloader": dataloader}
    step = TrainingStep(make_model(model_name), device)
    cpu_feeder = SlipstreamFeeder(folder, batch_size, torch.device("cpu")) if device.type == "cuda" else None
    runs: dict[str, list[dict[str, float]]] = {}
    try:
        outputs = same_outputs(feeders, device)
        for round_ in range(rounds):
            plan: list[tuple[str, Any, Any]] = [("ceiling", None, step)]
            for consumer in CONSUMERS:
                for name in FEEDERS:
                    plan.append((f"{name}/{consumer}", feeders[name], step if consumer == "step" else None))
            if cpu_feeder is not None:  # the same loader on the CPU: what the copies to the device cost it
                plan.append(("slipstream/nothing, cpu", cpu_feeder, None))
            if round_ % 2:
                plan.reverse()
            for key, feeder, consume in plan:
                source = ceiling_batches(batch_size, device) if feeder is None else feeder.batches()
                try:
                    result = measure(source, consume, device, warmup, seconds)
                finally:
                    source.close()
                runs.setdefault(key, []).append(result)
                log(f"round {round_ + 1}/{rounds} {key}: {result['images_per_s']:,.0f} images/s, "
                    f"waiting in next() {100 * result['host_wait_fraction']:.0f}%")
        settings = {name: {**feeder.settings, "output": outputs} for name, feeder in feeders.items()}
    finally:
        for feeder in [*feeders.values(), cpu_feeder]:
            if feeder is not None:
                feeder.close()
    return report(runs, settings, device, model_name, batch_size, rounds, seconds, warmup, folder)


def report(runs: dict[str, list[dict[str, float]]], settings: dict[str, Any], device: torch.device, model_name: str,
           batch_size: int, rounds: int, seconds: float, warmup: int, folder: Path) -> dict[str, Any]:
    """Medians and ranges per measurement, the GPU's wait for data per
    feeder, and the copy overlap."""
    rates = {key: [r["images_per_s"] for r in values] for key, values in runs.items()}
    ceiling = statistics.median(rates["ceiling"])
    table = {}
    for key, values in rates.items():
        waits = [r["host_wait_fraction"] for r in runs[key]]
        row = {"images_per_s": statistics.median(values), "min": min(values), "max": max(values),
               "runs": values, "host_wait_fraction": statistics.median(waits)}
        if key.endswith("/step"):
            row["gpu_wait_fraction"] = max(0.0, 1.0 - row["images_per_s"] / ceiling)
            row["gpu_wait_fraction_range"] = [max(0.0, 1.0 - max(values) / ceiling),
                                              max(0.0, 1.0 - min(values) / ceiling)]
        table[key] = row
    out: dict[str, Any] = {
        "dataset": str(folder), "device": str(device), "model": model_name, "batch_size": batch_size,
        "rounds": rounds, "seconds_per_measurement": seconds, "warmup_batches": warmup,
        "measurements": table, "settings": settings,
        "ratios": {"slipstream_over_dataloader_nothing": table["slipstream/nothing"]["images_per_s"]
                   / table["dataloader/nothing"]["images_per_s"],
                   "slipstream_over_dataloader_step": table["slipstream/step"]["images_per_s"]
                   / table["dataloader/step"]["images_per_s"]},
    }
    if "slipstream/nothing, cpu" in table:  # the device copies overlap decoding when this is near 1
        out["ratios"]["copy_overlap_device_over_cpu"] = (table["slipstream/nothing"]["images_per_s"]
                                                         / table["slipstream/nothing, cpu"]["images_per_s"])
    return out


def print_table(result: dict[str, Any]) -> None:
    print(f"\n{result['model']} on {result['device']}, batch {result['batch_size']}, images/s median [range] of "
          f"{result['rounds']} rounds, {result['seconds_per_measurement']} s each")
    print(f"{'measurement':<26} {'images/s':>26} {'GPU waits':>10} {'in next()':>10}")
    for key, row in result["measurements"].items():
        gpu = f"{100 * row['gpu_wait_fraction']:.0f}%" if "gpu_wait_fraction" in row else ""
        print(f"{key:<26} {summary(row['runs']):>26} {gpu:>10} {100 * row['host_wait_fraction']:>9.0f}%")
    for name, value in result["ratios"].items():
        print(f"{name}: {value:.2f}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path, help="a folder written by benchmarks/gpu_data.py")
    parser.add_argument("--device", default="cuda", help="torch device (default: cuda)")
    parser.add_argument("--model", default="resnet50", help="resnet50 (torchvision) or tiny")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="DataLoader workers (default: cores)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per measurement")
    parser.add_argument("--warmup", type=int, default=8, help="untimed batches per measurement")
    parser.add_argument("--json", type=Path, default=None, help="output JSON (default: benchmarks/results/)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    result = run(args.dataset, device, args.model, args.batch_size, args.workers, args.rounds, args.seconds,
                 args.warmup)
    print_table(result)
    print(f"wrote {record(result, 'training-step', args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
