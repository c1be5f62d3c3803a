"""Where to decode: the CPU pipeline against ``DecodeOnDevice`` (nvJPEG
through torchvision, with the crop, resize, flip and normalize on the GPU),
on the same JPEG bytes, on one machine.

Usage::

    python benchmarks/gpu_decode.py DATASET [DATASET ...] [--pipelines train val] [--rounds 2]
                                    [--seconds 2] [--batch-size 256] [--threads N] [--step] [--json PATH]

Each DATASET is a folder written by ``benchmarks/gpu_data.py`` (its
``data.slip``).  For every data set, pipeline (``train``:
``presets.imagenet_train(224)``, ``val``: ``presets.imagenet_val(224)``,
float16) and decode place (``cpu``: the compiled CPU pipeline, batches
copied to the GPU on the loader's side stream; ``cuda``: the same preset
with ``decode_device="cuda"``), a loader with ``device="cuda"`` is run for
two warm-up batches, then timed until ``--seconds`` have passed, the
device synchronized at both ends.  Reported: images/s and the CPU time the
process spent per image (all its threads), medians and ranges over
``--rounds`` interleaved rounds.  With ``--step``, each train measurement is
repeated feeding a ResNet-50 training step (``benchmarks/training_step.py``),
where the decode competes with the model for the GPU.  2-core timings
drift 10-40%; on the GPU machine compare the two places within one run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import torch

import slipstream as ss
from slipstream.ops import presets
from common import record, summary, time_loader  # noqa: E402  (benchmarks/, next to this file)

PIPELINES = {"train": presets.imagenet_train, "val": presets.imagenet_val}
PLACES = ("cpu", "cuda")


def measure(path: Path, pipeline: str, place: str, batch_size: int, seconds: float, threads: int | None,
            step: Any = None) -> dict[str, float]:
    """Images/s and CPU ms per image of one loader, feeding ``step`` (or nothing)."""
    pipelines = PIPELINES[pipeline](224, decode_device=None if place == "cpu" else "cuda")
    loader = ss.Loader(path, batch_size, pipelines, order=ss.Order("random", seed=1), device="cuda",
                       num_threads=threads, sharding=ss.Sharding(drop_last=True), verbose=False)
    try:
        count, wall, cpu = time_loader(loader, seconds, consume=step, synchronize=torch.cuda.synchronize)
        return {"images_per_s": count / wall, "cpu_ms_per_image": 1e3 * cpu / count}
    finally:
        loader.close()


def run(datasets: list[Path], pipelines: list[str], rounds: int, seconds: float, batch_size: int,
        threads: int | None, with_step: bool) -> dict[str, Any]:
    """Every (data set, pipeline, consumer, place) ``rounds`` times, the places interleaved; the report."""
    step = None
    if with_step:
        from training_step import TrainingStep, make_model

        step = TrainingStep(make_model("resnet50"), torch.device("cuda"))
    plan = [(d, p, c) for d in datasets for p in pipelines for c in (["nothing", "step"] if with_step and p == "train"
                                                                       else ["nothing"])]
    results: dict[str, Any] = {}
    for round_ in range(rounds):
        for dataset, pipeline, consumer in plan:
            for place in (PLACES if round_ % 2 == 0 else PLACES[::-1]):
                got = measure(dataset / "data.slip", pipeline, place, batch_size, seconds, threads,
                              step if consumer == "step" else None)
                key = f"{dataset.name}/{pipeline}/{consumer}"
                results.setdefault(key, {}).setdefault(place, []).append(got)
                print(f"round {round_ + 1}/{rounds} {key}, decode on {place}: {got['images_per_s']:,.0f} images/s, "
                      f"{got['cpu_ms_per_image']:.2f} CPU ms/image", flush=True)
    table = {}
    for key, by_place in results.items():
        row = {}
        for place, runs in by_place.items():
            rates = [r["images_per_s"] for r in runs]
            cpu = [r["cpu_ms_per_image"] for r in runs]
            row[place] = {"images_per_s": statistics.median(rates), "min": min(rates), "max": max(rates),
                          "cpu_ms_per_image": statistics.median(cpu), "runs": runs}
        row["gpu_over_cpu"] = row["cuda"]["images_per_s"] / row["cpu"]["images_per_s"]
        table[key] = row
    return table


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", type=Path, nargs="+", help="folders written by benchmarks/gpu_data.py")
    parser.add_argument("--pipelines", nargs="+", default=list(PIPELINES), choices=list(PIPELINES))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=None, help="loader threads (default: all cores)")
    parser.add_argument("--step", action="store_true", help="also feed a ResNet-50 training step (train)")
    parser.add_argument("--json", type=Path, default=None, help="write the report here (default: benchmarks/results)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_decode: no CUDA device here; nothing to measure")
        return 0
    table = run(args.datasets, args.pipelines, args.rounds, args.seconds, args.batch_size, args.threads, args.step)
    print(f"\n{'data/pipeline/consumer':<28} {'CPU decode img/s':>22} {'GPU decode img/s':>22} {'GPU/CPU':>8} "
          f"{'CPU ms/img (cpu, gpu)':>22}")
    for key, row in table.items():
        cells = [summary([r["images_per_s"] for r in row[p]["runs"]]) for p in PLACES]
        print(f"{key:<28} {cells[0]:>22} {cells[1]:>22} {row['gpu_over_cpu']:>8.2f} "
              f"{row['cpu']['cpu_ms_per_image']:>10.2f}, {row['cuda']['cpu_ms_per_image']:.2f}")
    settings = {"datasets": [str(d) for d in args.datasets], "pipelines": args.pipelines, "rounds": args.rounds,
                "seconds": args.seconds, "batch_size": args.batch_size, "threads": args.threads or "all cores",
                "step": args.step}
    print(f"wrote {record({'table': table, 'settings': settings}, 'gpu-decode', args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
