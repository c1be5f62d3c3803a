"""``slipstream bench``: how fast a dataset file streams through a standard
pipeline on this machine, epoch by epoch, with a progress bar."""

from __future__ import annotations

import os
import time
from typing import Any

from slipstream.errors import ArgumentError
from slipstream.format import Reader, open_dataset
from slipstream.loader import Loader
from slipstream.loader.options import _integer
from slipstream.ops import StoredBytes, presets


def _pipelines(reader: Reader, pipeline: str, field: str | None) -> dict[str, Any]:
    images = [n for n, f in reader.fields.items() if type(f).__name__ in ("RGBImageField", "BytesField")]
    if field is None:
        if len(images) != 1:
            raise ArgumentError(f"{reader.path} has {len(images)} image or bytes fields ({images}): choose one "
                                "with --field")
        field = images[0]
    elif field not in reader.fields:
        raise ArgumentError(f"{reader.path} has no field {field!r}; its fields: {list(reader.fields)}")
    if pipeline == "bytes":
        return {field: [StoredBytes(max(1, int(reader.metadata[field]["size"].max())))]}
    recipes = {"train": presets.imagenet_train, "val": presets.imagenet_val, "simclr": presets.simclr}
    if pipeline not in recipes:
        raise ArgumentError(f"unknown pipeline {pipeline!r}; choose from bytes, {', '.join(recipes)}")
    return recipes[pipeline](224, field=field)


def stream(path: str | os.PathLike, pipeline: str = "train", *, field: str | None = None, batch_size: int = 128,
           epochs: int = 3, threads: int | None = None, verbose: bool = True) -> list[float]:
    """Load ``path`` through ``pipeline`` (``train``, ``val``, ``simclr`` or
    ``bytes``) for one untimed warm-up epoch (compilation, page cache), then
    ``epochs`` timed ones; print and return the images/s of each.  The
    progress bar shows only on a terminal and with ``verbose``.

    Raises:
        ArgumentError: ``epochs`` is not a positive integer, or the loader's
            arguments are wrong (``batch_size``, ``threads``, ``field``).
    """
    from tqdm import tqdm

    _integer(epochs, "epochs", 1)
    with open_dataset(path) as reader:
        loader = Loader(reader, batch_size, _pipelines(reader, pipeline, field), num_threads=threads, as_dict=True)
        rates = []
        try:
            for epoch in range(epochs + 1):
                label = "warm-up" if epoch == 0 else f"epoch {epoch}/{epochs}"
                start, count = time.perf_counter(), 0
                with tqdm(total=len(loader.epoch_samples(loader.epoch)), desc=label, unit="img", unit_scale=True,
                          disable=None if verbose else True, leave=False) as progress:
                    for batch in loader:
                        n = len(next(iter(batch.values())))
                        count += n
                        progress.update(n)
                took = time.perf_counter() - start
                if epoch:
                    rates.append(count / took)
                if verbose:
                    print(f"{label}: {count} images in {took:.2f} s = {count / took:,.0f} images/s")
        finally:
            loader.close()
    if verbose:
        print(f"{pipeline}, batch {batch_size}: best {max(rates):,.0f} images/s, median "
              f"{sorted(rates)[len(rates) // 2]:,.0f}")
    return rates
