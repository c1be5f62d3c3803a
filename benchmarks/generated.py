"""The code every ``pipelines.py`` scenario compiles, as a digest per stage:
two revisions that give the same digests compile the same stages, so a
refactoring of the compiler that keeps them cannot change the speed.

Usage::

    python benchmarks/generated.py [FOLDER] [--images N] [--show] [--json PATH]

The dataset is the first ``--images`` (default 64) JPEGs of FOLDER (default
``../shared/data/imagenet-sample``), written once through
``slipstream.cached``; each scenario's loader is built (batch 128, as in
``pipelines.py``) and the source of each of its stages hashed (SHA-256,
12 hex digits).  ``--show`` prints the sources too.  Nothing is timed.  To
compare with another revision, run it from a worktree of that revision
(``PYTHONPATH`` set to the worktree) and compare the tables.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import slipstream as ss
from slipstream.sources import find_jpegs
from common import Repeated, record  # noqa: E402  (benchmarks/, next to this file)
from pipelines import BATCH, DEFAULT_FOLDER, SCENARIOS  # noqa: E402


def stage_sources(reader: ss.Reader) -> dict[str, list[str]]:
    """Scenario name -> the generated source of each of its stages, in stage order."""
    sources = {}
    for name, pipelines in SCENARIOS.items():
        if callable(pipelines):
            pipelines = pipelines(reader)
        loader = ss.Loader(reader, BATCH, {"label": [], **pipelines}, order=ss.Order("random", seed=0))
        sources[name] = [stage.source for stage in loader.compiled.sources]
    return sources


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER, help="folder of JPEGs")
    parser.add_argument("--images", type=int, default=64, help="JPEGs of the folder to use (default: 64)")
    parser.add_argument("--show", action="store_true", help="print each stage's source too")
    parser.add_argument("--json", type=Path, default=None, help="output JSON (default: benchmarks/results/)")
    args = parser.parse_args(argv)
    paths = find_jpegs(args.folder)[:args.images]
    if not paths:
        print(f"no JPEGs under {args.folder}")
        return 1
    fields = {"image": ss.RGBImageField(), "label": ss.IntField()}
    reader = ss.Reader(ss.cached(Repeated(paths, 1), fields, name=f"generated-{args.folder.name}-{len(paths)}"))
    sources = stage_sources(reader)
    digests = {name: [hashlib.sha256(s.encode()).hexdigest()[:12] for s in stages] for name, stages in sources.items()}
    print(f"{'scenario':<26} stage digests")
    for name, stages in digests.items():
        print(f"{name:<26} {' '.join(stages)}")
        if args.show:
            print("\n".join(sources[name]))
    everything = hashlib.sha256("".join(s for stages in sources.values() for s in stages).encode()).hexdigest()[:12]
    print(f"all stages: {everything}")
    out = record({"stages": digests, "all_stages": everything, "images": len(paths)},
                 "generated", args.json)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
