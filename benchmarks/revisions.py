"""A benchmark script run from two revisions of slipstream, interleaved: did a
change make the loader slower?

Usage::

    python benchmarks/revisions.py BASE [--script pipelines.py] [--rounds 3] [--json PATH] -- [SCRIPT ARGS]

BASE (a commit, tag or branch) is checked out into a temporary git
worktree; then, round after round, ``benchmarks/SCRIPT`` runs from BASE
and from this working tree, alternately (which goes first alternates too),
each in a fresh interpreter with its own tree first on ``PYTHONPATH`` and
the same native library (``$SLIPSTREAM_LIBRARY``), or, where the change
moved the C ABI, BASE with the library ``--base-library`` names (built from
BASE's ``native/`` with the same compiler flags).  The script must write its JSON report to the
path given with ``--json`` and report ``images_per_s`` by scenario (as
``pipelines.py`` does).  The table gives, per scenario, the median
images/s of each revision with its range, and the median of the rounds'
ratios (this tree over BASE) with their range: each round's two runs are
back to back, so drift between rounds cancels in its ratio.  2-core
timings drift by 10-40% over minutes: read the ratios, not the rates.

Example (ImageNet train, val and multi-crop, before and after a change)::

    python benchmarks/revisions.py main~3 -- ../shared/data/imagenet-sample \\
        --only "ImageNet train" "ImageNet val" "multi-crop, one decode"
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import record, summary  # noqa: E402  (benchmarks/, next to this file)

REPO_ROOT = Path(__file__).resolve().parent.parent


def run(tree: Path, script: str, arguments: list[str], out: Path, library: Path | None) -> dict[str, float]:
    """images/s by scenario of one run of ``benchmarks/script`` from ``tree``
    (with the native library ``library``, or the environment's)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))}
    if library is not None:
        env["SLIPSTREAM_LIBRARY"] = str(library)
    command = [sys.executable, str(tree / "benchmarks" / script), *arguments, "--json", str(out)]
    # Run from this checkout's root, so that relative paths among the arguments name the same files for both.
    done = subprocess.run(command, env=env, cwd=REPO_ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed in {tree}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return json.loads(out.read_text())["images_per_s"]


def main(argv: list[str]) -> int:
    ours, _, script_args = (argv[:argv.index("--")], None, argv[argv.index("--") + 1:]) if "--" in argv \
        else (argv, None, [])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", help="the revision to compare this working tree with")
    parser.add_argument("--script", default="pipelines.py", help="the script under benchmarks/ (default: pipelines.py)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each running both revisions (default: 3)")
    parser.add_argument("--json", type=Path, default=None, help="output JSON (default: benchmarks/results/)")
    parser.add_argument("--base-library", type=Path, default=None,
                        help="the libslipstream BASE runs with, where its ABI differs from this tree's")
    args = parser.parse_args(ours)
    if args.base_library is not None and not args.base_library.is_file():
        parser.error(f"--base-library {args.base_library}: no such file")
    commit = subprocess.run(["git", "rev-parse", "--short", args.base], cwd=REPO_ROOT, capture_output=True,
                            text=True, check=True).stdout.strip()
    head = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO_ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        base_tree = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(base_tree), commit], cwd=REPO_ROOT, check=True)
        try:
            trees = {commit: base_tree, head: REPO_ROOT}
            rates: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
            for round_ in range(args.rounds):
                order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
                for name in order:
                    library = args.base_library if name == commit else None
                    rates[name].append(run(trees[name], args.script, script_args, Path(tmp) / f"{round_}.json",
                                           library))
                    print(f"  round {round_ + 1}, {name}: " + ", ".join(
                        f"{s} {r:,.0f}" for s, r in rates[name][-1].items()), flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base_tree)], cwd=REPO_ROOT, check=False)
    scenarios = [s for s in rates[head][0] if s in rates[commit][0]]
    ratios = {s: [ours_[s] / theirs[s] for ours_, theirs in zip(rates[head], rates[commit])] for s in scenarios}
    print(f"\n{args.script} {' '.join(script_args)}: {args.rounds} rounds, images/s (median [range])")
    print(f"{'scenario':<26} {commit:>24} {head:>24} {'ratio':>20}")
    for s in scenarios:
        print(f"{s:<26} {summary([r[s] for r in rates[commit]]):>24} {summary([r[s] for r in rates[head]]):>24} "
              f"{summary(ratios[s], 3):>20}")
    report = {"script": args.script, "arguments": script_args, "base": commit, "head": head, "rounds": args.rounds,
              "images_per_s": rates, "ratios": ratios,
              "median_ratio": {s: statistics.median(values) for s, values in ratios.items()}}
    print(f"wrote {record(report, 'revisions', args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
