"""Pipelines without randomness give the same batches whatever the front
end that builds them: SHA-256 hashes of their batches against the table
tests/fixtures/fixed_pipelines.json, recorded before the pipeline front end
was rebuilt (operation kinds, generated-parameter symbols, random streams
keyed by identity).

Unlike tests/fixtures/determinism.json, this table is not regenerated when
random streams change: nothing here draws a random number, so any change to
a hash is a change of behaviour.  The images are stored raw, except in the
one JPEG case, keyed by libjpeg-turbo's version.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from test_determinism import dataset, digest, libjpeg_version, picture

HERE = Path(__file__).resolve().parent
TABLE = HERE / "fixtures" / "fixed_pipelines.json"


def loader_cases() -> dict[str, dict[str, Any]]:
    """Name -> loader arguments, every pipeline free of randomness."""
    import slipstream as ss
    from slipstream.ops import CenterCrop, Convert, Normalize, Resize, ToTensor, presets

    return {
        "center crop uint8": dict(pipelines={"image": [CenterCrop(32, ratio=0.875)]}),
        "imagenet_val float16": dict(pipelines=presets.imagenet_val(24)),
        "resize then center crop, float32": dict(pipelines={"image": [
            Resize(40), CenterCrop(32), ToTensor(), Normalize(dtype=np.float32)]}),
        "two outputs of one field and the label": dict(pipelines={
            "image": [CenterCrop(24), Normalize(dtype=np.float32)],
            "small": ss.View("image", [CenterCrop(16, ratio=1.0)]),
            "label": []}),
        "torch stage after a compiled one": dict(pipelines={"image": [
            CenterCrop(16), ToTensor(), Convert("float32")]}),
    }


def compiler_cases() -> dict[str, list[Any]]:
    """Name -> a compiler.Pipeline over in-memory arrays, free of randomness."""
    from slipstream.compiler import ArraySource
    from slipstream.ops import Normalize

    images = np.stack([picture(3 * i)[:40, :48] for i in range(12)])
    return {
        "array source, normalize": [ArraySource(images), Normalize(dtype=np.float32)],
        "array source, scalars": [ArraySource(np.arange(12, dtype=np.int64) * 7)],
    }


def hashes(folder: Path) -> dict[str, list[dict[str, str]]]:
    """Case name -> per batch, output name -> hash."""
    import slipstream as ss
    from slipstream.compiler import Pipeline
    from slipstream.ops import CenterCrop

    table: dict[str, list[dict[str, str]]] = {}
    raw = dataset(folder, raw=True)
    for name, kwargs in loader_cases().items():
        with ss.Loader(raw, 8, order="sequential", as_dict=True, verbose=False, **kwargs) as loader:
            table[name] = [{key: digest(value) for key, value in batch.items()} for batch in loader]
    for name, entries in compiler_cases().items():
        compiled = Pipeline(entries).compile(batch_size=5)
        table[f"compiler: {name}"] = [{"output": digest(compiled(np.arange(k, k + 5)))} for k in (0, 5)]
    jpeg = dataset(folder, raw=False)
    with ss.Loader(jpeg, 8, {"image": [CenterCrop(32)]}, order="sequential", as_dict=True,
                   verbose=False) as loader:
        table[f"jpeg center crop, libjpeg-turbo {libjpeg_version()}"] = [
            {key: digest(value) for key, value in batch.items()} for batch in loader]
    return table


def test_fixed_pipelines_give_the_batches_recorded_before_the_front_end_change(tmp_path):
    committed = json.loads(TABLE.read_text())
    now = hashes(tmp_path)
    compared = 0
    for name, rows in now.items():
        if name.startswith("jpeg center crop") and name not in committed:
            continue  # another libjpeg-turbo than the table's
        assert name in committed, f"new case {name!r}: record it with python tests/test_fixed_pipelines.py --add"
        assert rows == committed[name], f"the batches of {name!r}, which has no randomness, changed"
        compared += 1
    assert compared >= len(loader_cases()) + len(compiler_cases())


if __name__ == "__main__":
    if sys.argv[1:] != ["--add"]:
        sys.exit("usage: python tests/test_fixed_pipelines.py --add   (records new cases; never rewrites old ones)")
    import tempfile

    sys.path.insert(0, str(HERE))
    with tempfile.TemporaryDirectory() as tmp:
        table = hashes(Path(tmp))
    old = json.loads(TABLE.read_text()) if TABLE.exists() else {}
    added = sorted(name for name in table if name not in old)
    TABLE.write_text(json.dumps({**table, **old}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {TABLE}: added {', '.join(added) or 'nothing'}")
