"""The stumbles of a new user's first hour, each answered: the source tree
imported in place of the installed package, FFCV's spellings, a path that
does not exist, a device the machine lacks, what the demo prints, when a
batch's memory is reused, and every Python block of docs/ run as pasted."""

from __future__ import annotations

import ast
import enum
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import slipstream as ss
from cli_command import run_slipstream
from slipstream.loader.orders import ORDERS
from slipstream.ops import ToDevice

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """48 small raw images labelled 0 to 47, in order."""
    path = tmp_path_factory.mktemp("first-contact") / "small.slip"
    rng = np.random.default_rng(0)
    ss.write(path, [(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8), k) for k in range(48)],
             {"image": ss.RGBImageField("raw"), "label": ss.IntField()}, workers=0, verbose=False)
    return path


# ---------------------------------------------------------------- the source tree hides the installed package


def installed_library() -> Path:
    """The library of the installed slipstream distribution (skips without one)."""
    try:
        library = Path(str(importlib.metadata.distribution("slipstream").locate_file("slipstream/libslipstream.so")))
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("slipstream is not installed as a distribution here")
    if not library.is_file():
        pytest.skip(f"the installed slipstream has no library at {library}")
    return library.resolve()


def test_importing_the_source_tree_names_the_installed_package_it_hides(tmp_path):
    installed = installed_library()
    tree = tmp_path / "checkout"  # a repository root: the package beside pyproject.toml and native/, nothing built
    shutil.copytree(Path(ss.__file__).parent, tree / "slipstream", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copytree(ROOT / "native" / "include", tree / "native" / "include")
    shutil.copy(ROOT / "pyproject.toml", tree)
    env = {k: v for k, v in os.environ.items() if k != "SLIPSTREAM_LIBRARY"}
    proc = subprocess.run([sys.executable, "-c", "import slipstream"], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1
    assert (f"LibraryError: the native library {tree / 'slipstream' / 'libslipstream.so'} does not exist: slipstream "
            f"was imported from the source tree {tree}, which hides the installed slipstream in {installed.parent} "
            "(Python looks in the current folder and PYTHONPATH first). Run Python from another folder, install the "
            "tree in place (`pip install -e .`), or set SLIPSTREAM_LIBRARY to a built libslipstream.so.") \
        in proc.stderr, proc.stderr[-2000:]


# ---------------------------------------------------------------- FFCV's spellings


@pytest.mark.parametrize(("keyword", "answer"), [
    ("num_workers", r"slipstream runs its pipelines in threads, not worker processes: pass num_threads="),
    ("shuffle", r'pass order="random" \(shuffle=True\) or order="sequential" \(shuffle=False\)'),
    ("prefetch_factor", r"pass memory=slipstream\.Memory\(batches_ahead=\.\.\.\)"),
    ("fname", r"pass the dataset as the first argument, path_or_reader"),
], ids=lambda value: value if value.isidentifier() else "")
def test_other_loaders_keywords_are_answered_with_slipstreams(dataset, keyword, answer):
    with pytest.raises(ss.ArgumentError, match=rf"^Loader\(\) got an unexpected keyword argument '{keyword}': "
                                               rf"{answer}"):
        ss.Loader(dataset, 16, **{keyword: 8})
    with pytest.raises(ss.ArgumentError, match=r"^Loader\(\) got an unexpected keyword argument 'workers'$"):
        ss.Loader(dataset, 16, workers=8)


OrderOption = enum.Enum("OrderOption", ["SEQUENTIAL", "RANDOM", "QUASI_RANDOM"])  # as FFCV declares it


@pytest.mark.parametrize(("order", "kind"), [("RANDOM", "random"), ("OrderOption.QUASI_RANDOM", "quasi_random"),
                                             (OrderOption.SEQUENTIAL, "sequential")])
def test_ffcv_orders_are_answered_with_slipstreams(dataset, order, kind):
    with pytest.raises(ss.ArgumentError, match=rf"order must be one of {re.escape(str(ORDERS))}, "
                                               rf"got .*: slipstream spells FFCV's OrderOption\.{kind.upper()} "
                                               rf"order='{kind}' \(or slipstream\.Order\('{kind}', seed=\.\.\.\)\)"):
        ss.Loader(dataset, 16, order=order)
    with pytest.raises(ss.ArgumentError, match=r"got 'shuffled'$"):
        ss.Order("shuffled")


def test_ffcv_write_modes_are_answered_with_slipstreams():
    with pytest.raises(ss.ArgumentError, match=r"""^write_mode must be one of \('jpeg', 'raw', 'smart', 'yuv420'\), """
                                               r"""got 'jpg': slipstream spells FFCV's "jpg" "jpeg"$"""):
        ss.RGBImageField(write_mode="jpg")
    with pytest.raises(ss.ArgumentError, match=r"""got 'proportion': FFCV's "proportion" \(a random share of the """
                                               r"""images as JPEG\) has no slipstream equivalent: "smart" stores"""):
        ss.RGBImageField(write_mode="proportion")
    with pytest.raises(ss.ArgumentError, match=r"got 'png'$"):
        ss.RGBImageField(write_mode="png")


# ---------------------------------------------------------------- a path that does not exist


def test_a_missing_path_says_it_does_not_exist(tmp_path):
    missing = tmp_path / "no-such" / "train.slip"
    for attempt in (lambda: ss.Loader(missing, 16, verbose=False), lambda: ss.cached(missing, verbose=False),
                    lambda: ss.write(tmp_path / "out.slip", missing, verbose=False),
                    lambda: ss.SegmentationFolder(missing, tmp_path)):
        with pytest.raises(ss.DatasetNotFoundError, match=rf"^{re.escape(str(missing))} does not exist"):
            attempt()
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ss.DatasetNotFoundError, match=r"a-file is not a folder$"):
        ss.write(tmp_path / "out.slip", tmp_path / "a-file", verbose=False)
    assert not (tmp_path / "out.slip").exists()


# ---------------------------------------------------------------- a device the machine lacks


def test_to_device_checks_its_device_when_made():
    import torch

    wanted = f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"
    with pytest.raises(ss.ArgumentError, match=rf"^ToDevice: device '{wanted}' was asked for, but torch "
                                               rf"finds "):
        ToDevice(wanted)
    with pytest.raises(ss.ArgumentError, match=r"^ToDevice: device 'gpu0' is not a torch device"):
        ToDevice("gpu0")
    assert ToDevice("cpu").device == torch.device("cpu")


# ---------------------------------------------------------------- the demo


def test_the_demo_prints_the_batch_shape_and_the_last_partial_batch(tmp_path):
    demo = run_slipstream("demo", "--count", "80", "--epochs", "1", "--grid", "", cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    [epoch] = [line for line in demo.stdout.splitlines() if line.startswith("epoch ")]
    assert epoch.startswith("epoch 1: 80 images in ")
    assert epoch.endswith("; batches of (64, 3, 224, 224), the last of 16)"), epoch


# ---------------------------------------------------------------- when a batch's memory is reused


def test_the_quickstart_says_when_a_batch_is_reused_and_it_is(dataset):
    text = " ".join(README.read_text().split("## Quickstart", 1)[1].split("\n## ", 1)[0].split())
    assert ("A batch stays as it is until you take the next one: its memory is used again `batches_ahead + 2` "
            "batches later (5 with the default `ss.Memory(batches_ahead=3)`), filled as soon as the batch after it "
            "is taken, so `[x for x, y in loader]` keeps overwritten tensors: `.clone()` a batch to keep it "
            "longer.") in text
    with ss.Loader(dataset, 4, order="sequential", verbose=False) as loader:
        kept, cloned = zip(*[(y, y.clone()) for _, y in loader])
    assert [batch.tolist() for batch in cloned] == [list(range(k, k + 4)) for k in range(0, 48, 4)]
    assert kept[0].data_ptr() == kept[5].data_ptr() and kept[0].data_ptr() not in {b.data_ptr() for b in kept[1:5]}
    assert kept[0].tolist() != cloned[0].tolist()  # overwritten by a later batch
    with ss.Loader(dataset, 4, order="sequential", memory=ss.Memory(batches_ahead=1), verbose=False) as loader:
        batches = iter(loader)
        first = next(batches)[1]
        assert first.tolist() == [0, 1, 2, 3]
        next(batches)  # from now on the first batch's memory is filled again, by batch 3 (slot 0 of 3)
        deadline = time.monotonic() + 60
        while first.tolist() == [0, 1, 2, 3] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert first.tolist() == [12, 13, 14, 15]


# ---------------------------------------------------------------- every Python block of docs/ runs

NOT_RUN = re.compile(r"^<!-- not run: (.+) -->$")
"""Marks the Python block below it as one that cannot run here, saying why."""
AFTER = "<!-- runs after the block above -->"
"""Marks the Python block below it as a continuation: it runs after the page's previous block, in one process."""


@dataclass(frozen=True)
class Block:
    """A fenced Python block of a page of docs/."""

    page: str
    line: int
    code: str
    heading: str
    marker: str

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def page_blocks(path: Path) -> list[Block]:
    """The Python blocks of ``path``, each with the heading above it and the marker line before its fence."""
    found, lines = [], path.read_text(encoding="utf-8").splitlines()
    heading, fence, start = "", None, 0
    for number, line in enumerate(lines):
        if line.startswith("```") and fence is None:
            fence, start = line[3:].strip(), number
        elif line.startswith("```"):
            if fence == "python":
                marker = lines[start - 1].strip() if start else ""
                found.append(Block(f"docs/{path.name}", start + 1, "\n".join(lines[start + 1:number]) + "\n",
                                   heading, marker))
            fence = None
        elif fence is None and line.startswith("#"):
            heading = line.lstrip("#").strip()
    return found


def docs_blocks() -> list[Block]:
    return [block for path in sorted(DOCS.glob("*.md")) for block in page_blocks(path)]


def signature_of(block: Block) -> str | None:
    """The operation whose signature ``block`` shows (a lone call of the name in its heading), else None:
    tests/test_docs_operations.py checks those against the code."""
    name = block.heading.strip("`")
    try:
        call = ast.parse(block.code, mode="eval").body
    except SyntaxError:
        return None
    if block.heading == f"`{name}`" and isinstance(call, ast.Call) and ast.unparse(call.func) == name:
        return name
    return None


def program(block: Block, blocks: list[Block]) -> str:
    """The code that runs ``block``: after the blocks it continues, when it is marked so."""
    if block.marker != AFTER:
        return block.code
    earlier = [other for other in blocks if other.page == block.page and other.line < block.line]
    assert earlier, f"{block.name} runs after the block above, but it is the page's first"
    return program(earlier[-1], blocks) + "\n" + block.code


BLOCKS = docs_blocks()
RUN = [block for block in BLOCKS if signature_of(block) is None]


def test_docs_has_python_blocks_and_every_signature_is_checked():
    from test_docs_operations import OBJECTS

    signatures = [signature_of(block) for block in BLOCKS if signature_of(block) is not None]
    assert len(RUN) >= 10 and len(signatures) >= 40
    assert set(signatures) <= set(OBJECTS), set(signatures) - set(OBJECTS)
    for block in BLOCKS:
        assert block.marker in ("", AFTER) or NOT_RUN.match(block.marker) or not block.marker.startswith("<!--"), \
            f"{block.name}: unknown marker {block.marker!r}"


@pytest.fixture
def workdir(tmp_path) -> Path:
    """A folder holding the files the pages name: train.slip, a dataset of small labelled images."""
    from slipstream.sources import synthetic_folder

    folder = synthetic_folder(tmp_path / "images", count=12, height=48, width=64, verbose=False)
    ss.write(tmp_path / "train.slip", folder, workers=0, verbose=False)
    return tmp_path


@pytest.mark.parametrize("block", RUN, ids=[block.name for block in RUN])
def test_the_python_block_runs_as_pasted(block, workdir):
    if reason := NOT_RUN.match(block.marker):
        pytest.skip(f"{block.name} is marked not run: {reason.group(1)}")
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(workdir / "cache")}
    proc = subprocess.run([sys.executable, "-c", program(block, BLOCKS)], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"{block.name} fails as pasted:\n{proc.stderr[-3000:]}"
