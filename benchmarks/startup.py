"""Where a fresh process's time to its first batch goes.

Usage::

    python benchmarks/startup.py [--rounds 7] [--json PATH]

Each row is a fresh interpreter that runs one snippet and reports the
seconds from its first statement to the snippet's end; the rows run
interleaved, round after round, with the compile caches warm (each snippet
runs once before the rounds), and the table gives medians and ranges:

``torch``
    ``import torch``: what every loader that hands over tensors pays.
``torch + numba``
    and ``import numba``.
``torch + numba + a cached njit``
    and the first call of a small ``numba.njit(parallel=True, cache=True)``
    function loaded from Numba's disk cache: the floor of any loader whose
    compiled code Numba loads (it initialises Numba's CPU target then).
``torch + slipstream``
    ``import torch, slipstream`` and ``slipstream.ops``.
``first batch``
    and a :class:`slipstream.Loader` with ``presets.imagenet_train(224)``
    over 512 JPEGs of 320 x 400 (written once), until the first batch of
    256 is in hand: what ``compare.py``'s first-batch column measures.

The last column is each row's time beyond ``import torch``; the lines under
the table split the first batch's own share into Numba's floor and the rest.
2-core timings drift by 10-40% from run to run: compare rows of one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

from common import record, seconds_printed, summary  # noqa: E402  (benchmarks/, next to this file)

NJIT_MODULE = '''
import numba
import numpy as np


@numba.njit(parallel=True, cache=True, nogil=True)
def doubled(x):
    out = np.empty_like(x)
    for i in numba.prange(x.size):
        out[i] = 2 * x[i]
    return out
'''

SNIPPETS = {
    "torch": "import torch",
    "torch + numba": "import torch\nimport numba",
    "torch + numba + a cached njit": "import torch\nimport numpy as np\nimport cached_njit\n"
                                     "cached_njit.doubled(np.ones(8))",
    "torch + slipstream": "import torch\nimport slipstream\nimport slipstream.ops",
    "first batch": """
        import torch
        import slipstream as ss
        from slipstream.ops import presets
        loader = ss.Loader(ss.open_dataset(DATA), 256, {"label": [], **presets.imagenet_train(224)},
                           order=ss.Order("random", seed=0), as_dict=True)
        batch = next(iter(loader))
        loader.close()
    """,
}


def write_data(path: Path) -> None:
    """512 synthetic JPEGs of 320 x 400 with labels, as a slipstream file."""
    import io

    import numpy as np
    from PIL import Image

    import slipstream as ss
    from slipstream.sources import CLASSES, synthetic_image

    rng = np.random.default_rng(0)
    samples = []
    for k in range(512):
        encoded = io.BytesIO()
        Image.fromarray(synthetic_image(CLASSES[k % len(CLASSES)], rng, 320, 400)).save(encoded, "JPEG", quality=90)
        samples.append((encoded.getvalue(), k % len(CLASSES)))
    ss.write(path, samples, {"image": ss.RGBImageField(), "label": ss.IntField()}, verbose=False)


def run_snippet(snippet: str, folder: Path, data: Path) -> float:
    """Seconds a fresh interpreter takes from its first statement to the end of ``snippet``."""
    body = textwrap.dedent(snippet).strip()
    script = f"import time\n_start = time.monotonic()\nDATA = {str(data)!r}\n{body}\n" \
             f"print(time.monotonic() - _start)\n"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))}
    return seconds_printed(script, env, folder, f"the snippet\n{body}\n")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    parser.add_argument("--json", type=Path, default=None, help="output JSON (default: benchmarks/results/)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "cached_njit.py").write_text(NJIT_MODULE)
        data = folder / "data.slip"
        write_data(data)
        for snippet in SNIPPETS.values():  # fills Numba's and slipstream's caches, and the OS's
            run_snippet(snippet, folder, data)
        times: dict[str, list[float]] = {name: [] for name in SNIPPETS}
        for _ in range(args.rounds):
            for name, snippet in SNIPPETS.items():
                times[name].append(run_snippet(snippet, folder, data))
    torch_s = statistics.median(times["torch"])
    print(f"{'what':34} {'seconds':>22} {'beyond import torch':>20}")
    for name, values in times.items():
        print(f"{name:34} {summary(values, 3):>22} {statistics.median(values) - torch_s:>20.3f}")
    floor = statistics.median(times["torch + numba + a cached njit"]) - torch_s
    own = statistics.median(times["first batch"]) - torch_s
    print(f"\nthe first batch's own share: {own:.3f} s, of which Numba's floor (import, CPU target, a cached "
          f"function) {floor:.3f} s and the rest {own - floor:.3f} s")
    report = {"rounds": args.rounds, "seconds": times, "beyond_import_torch_s": {
        name: statistics.median(values) - torch_s for name, values in times.items()},
        "numba_floor_s": floor, "first_batch_own_s": own}
    print(f"wrote {record(report, 'startup', args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
