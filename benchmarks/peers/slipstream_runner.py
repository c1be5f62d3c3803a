"""slipstream's benchmark runner (see RUNNERS.md): one scenario over a
slipstream file or an FFCV .beton, in this process, with the main
environment's interpreter."""

from __future__ import annotations

import time

_STARTED = time.monotonic()

import argparse  # noqa: E402
import json  # noqa: E402


import slipstream as ss  # noqa: E402
from peer_common import cpu_seconds, emit, peak_rss_mb  # noqa: E402  (benchmarks/peers, next to this file)
from slipstream.ops import StoredBytes, multi_crop_pipelines, presets  # noqa: E402


def pipelines(scenario: str, reader: ss.Reader, num_classes: int | None = None) -> dict:
    image = "image"
    if scenario == "raw":
        return {image: [StoredBytes(int(reader.metadata[image]["size"].max()))]}
    if scenario == "train":
        return presets.imagenet_train(224)
    if scenario == "val":
        return presets.imagenet_val(224)
    if scenario == "simclr":
        return presets.simclr(224)
    if scenario == "multicrop":
        return multi_crop_pipelines()
    if scenario == "recipe":  # torchvision's reference recipe, batch mixing included
        return presets.torchvision_train(176, num_classes=num_classes)
    raise ValueError(f"unknown scenario {scenario!r}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spec", required=True)
    spec = json.loads(open(parser.parse_args().spec).read())
    reader = ss.open_dataset(spec["data"])
    chosen = pipelines(spec["scenario"], reader, spec.get("num_classes"))
    loader = ss.Loader(reader, spec["batch_size"], {"label": [], **chosen},
                       order=ss.Order("random", seed=0), num_threads=spec["threads"], as_dict=True)
    result = {"system": "slipstream", "version": ss.__version__, "scenario": spec["scenario"],
              "settings": {"order": "random", "os_cache": True, "threads": spec["threads"],
                           "batches_ahead": loader.batches_ahead, "format": type(reader).__name__}}
    if spec.get("first_batch_only"):
        batch = next(iter(loader))
        result["first_batch_s"] = time.monotonic() - spec.get("start_monotonic", _STARTED)
        result["first_batch_images"] = len(batch["label"])
    else:
        for _ in range(spec["warmup_epochs"]):
            for _batch in loader:
                pass
        rates, images = [], 0
        cpu = cpu_seconds()
        for _ in range(spec["epochs"]):
            start, images = time.perf_counter(), 0
            for batch in loader:  # a training step would take the batch; nothing else is done here
                images += len(batch["label"])
            rates.append(images / (time.perf_counter() - start))
        result.update(epoch_images_per_s=rates, images=images,
                      cpu_seconds_per_image=(cpu_seconds() - cpu) / (images * spec["epochs"]))
    result["peak_rss_mb"] = peak_rss_mb()
    loader.close()
    emit(result)


if __name__ == "__main__":
    main()
