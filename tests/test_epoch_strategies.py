"""A loader's epochs come from one epoch source at a time
(:mod:`slipstream.loader.epoch_sources`), each staging its batches through
a :class:`slipstream.loader.stager.Stager`: shown on real datasets, that
every stager and every source has what the loader asks of it, and that a
loader over a source whose file is being written hands its epochs over to
the finished file once the file is complete (or to a refusal, when it
cannot be completed)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from test_sources import jpegs, write_tars

import slipstream as ss
from slipstream.format import arriving
from slipstream.loader import epoch_sources, staging
from slipstream.loader.arrival_staging import ArrivalStager
from slipstream.loader.epoch_sources import (ArrivingEpochs, EpochSource, FileEpochs, FormingEpochs,
                                             RefusedEpochs)
from slipstream.loader.first_epoch import FormingStager
from slipstream.loader.stager import Stager
from slipstream.sources import synthetic_folder

PIPELINES = {"image": [ss.ops.CenterCrop(16)], "label": None}
"""A decode without random draws: every epoch in sequential order gives the same batches."""

LOADER = Path(ss.__file__).parent / "loader"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return synthetic_folder(tmp_path_factory.mktemp("strategies") / "images", count=30, height=40, width=48,
                            verbose=False)


class UncountedShards(ss.WebDataset):
    """Tar shards that do not say how many samples they hold: epoch 0 is formed as they are read."""

    def length_hint(self):
        return None


def uncounted_shards(folder: Path, count: int) -> UncountedShards:
    write_tars(folder, jpegs(count, seed=7), per_shard=10, extra={k: {"cls": k} for k in range(count)})
    return UncountedShards(folder)


def epoch(loader: ss.Loader) -> list[list[np.ndarray]]:
    return [[value.numpy().copy() for value in batch] for batch in loader]


def same(a: list[list[np.ndarray]], b: list[list[np.ndarray]]) -> bool:
    return len(a) == len(b) and all(len(x) == len(y) and all(np.array_equal(u, v) for u, v in zip(x, y))
                                    for x, y in zip(a, b))


def test_the_stager_protocol_names_what_the_loader_and_its_iterator_use():
    members = {name for name in vars(Stager) if not name.startswith("_")} | set(Stager.__annotations__)
    assert members == {"storage", "start_epoch", "prepare", "release", "verify", "close"}


def test_no_loader_module_tells_stagers_apart_by_their_class():
    stagers = {"Stager", "ArrivalStager", "FormingStager"}
    found = []
    for path in sorted(LOADER.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance" \
                    and len(node.args) == 2:
                named = {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node.args[1])
                         if isinstance(n, (ast.Name, ast.Attribute))}
                if named & stagers:
                    found.append(f"{path.name}:{node.lineno}")
    assert found == []


def test_the_arrival_stager_is_the_loaders_and_the_format_knows_no_loader():
    assert not hasattr(arriving, "ArrivalStager") and "ArrivalStager" not in Path(arriving.__file__).read_text()
    for path in sorted((Path(ss.__file__).parent / "format").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("slipstream.loader"), (path.name, node.module)


def test_a_finished_files_page_stager_is_a_stager(tmp_path):
    path = ss.write(tmp_path / "d.slip", {"label": np.arange(10)}, {"label": ss.IntField()}, workers=0,
                    verbose=False).path
    with ss.Reader(path) as reader:
        stager = staging.Stager(reader.page_store(os_cache=True, pool_pages=0), reader)
        assert isinstance(stager, Stager)
        stager.close()
    with ss.Loader(path, 4, order="sequential", verbose=False) as loader:
        assert isinstance(loader._epochs, FileEpochs) and isinstance(loader._epochs, EpochSource)
        assert isinstance(loader.memory, staging.Stager) and isinstance(loader.memory, Stager)
        assert loader._epochs.first is None and loader._epochs.held_file() == path
        assert [batch[0].tolist() for batch in loader] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_a_first_epochs_arrival_stager_is_a_stager_until_the_file_takes_over(folder, cache):
    with ss.Loader(folder, 8, PIPELINES, order="sequential", verbose=False) as loader:
        arriving = loader._epochs
        assert isinstance(arriving, ArrivingEpochs) and isinstance(arriving, EpochSource)
        assert isinstance(loader.memory, ArrivalStager) and isinstance(loader.memory, Stager)
        assert arriving.first is not None and arriving.held_file() is None
        first = epoch(loader)
        assert loader._epochs is arriving and not list(cache.glob("*.slip"))  # epoch 0 over the file being written
        second = epoch(loader)  # the file completed, then read
        finished = loader._epochs
        assert isinstance(finished, FileEpochs) and finished.first is None
        assert arriving.first.closed  # the first epoch let go of its lock, threads and temporary file
        assert isinstance(loader.reader, ss.Reader) and [loader.reader.path] == sorted(cache.glob("*.slip"))
        assert loader.memory is finished.stager and isinstance(loader.memory, staging.Stager)
        assert finished.held_file() == loader.reader.path  # held while the loader reads it
        assert same(first, second) and len(first) == 4


def test_a_stream_of_unknown_length_forms_epoch_0_then_reads_the_finished_file(cache, tmp_path):
    shards = uncounted_shards(tmp_path / "wds", 25)
    with ss.Loader(shards, 4, {"image": [ss.ops.CenterCrop(16)], "json": None}, order="sequential",
                   verbose=False) as loader:
        forming = loader._epochs
        assert isinstance(forming, FormingEpochs) and isinstance(forming, EpochSource) and not forming.counted
        assert isinstance(loader.memory, FormingStager) and isinstance(loader.memory, Stager)
        with pytest.raises(TypeError, match="known only at its end"):
            len(loader)
        labels = [batch[1].tolist() for batch in loader]
        assert labels == [list(range(k, min(k + 4, 25))) for k in range(0, 25, 4)]
        assert loader._epochs is forming
        assert [batch[1].tolist() for batch in loader] == labels  # epoch 1, over the finished file
        assert isinstance(loader._epochs, FileEpochs) and loader._epochs.counted and len(loader) == 7
        assert isinstance(loader.memory, staging.Stager) and [loader.reader.path] == sorted(cache.glob("*.slip"))


def test_a_first_epoch_whose_file_cannot_be_completed_gives_way_to_a_refusal(cache, tmp_path):
    folder = tmp_path / "bad" / "a"
    folder.mkdir(parents=True)
    for k, data in enumerate(jpegs(8, seed=31)):
        (folder / f"{k}.jpg").write_bytes(data)
    (folder / "5.jpg").write_bytes(jpegs(1, seed=32)[0][:200])  # cut short: completing the file encodes it
    loader = ss.Loader(folder.parent, 2, {"image": [ss.ops.CenterCrop(16)]}, indices=[0, 1, 6, 7],
                       order="sequential", verbose=False)
    assert len(epoch(loader)) == 2
    with pytest.raises(ss.FieldValueError, match=r"5\.jpg"):
        iter(loader)
    refused = loader._epochs
    assert isinstance(refused, RefusedEpochs) and isinstance(refused, EpochSource) and refused.first is None
    with pytest.raises(ss.SlipstreamError, match=r"cannot run another epoch: completing .* failed"):
        iter(loader)
    assert loader._epochs is refused
    loader.close()
    assert not list(cache.glob("*.slip")) and not list(cache.glob(".*.tmp"))


def test_every_epoch_source_has_every_method_the_loader_asks_of_one():
    methods = {name for name, value in vars(EpochSource).items() if not name.startswith("_") and callable(value)}
    assert {"for_epoch", "finished", "batches", "identity", "close", "abandon"} <= methods
    for source in (FileEpochs, ArrivingEpochs, FormingEpochs, RefusedEpochs):
        assert [name for name in sorted(methods) if not callable(getattr(source, name, None))] == [], source.__name__
    assert set(epoch_sources.__all__) >= {"EpochSource", "FileEpochs", "ArrivingEpochs", "FormingEpochs",
                                          "RefusedEpochs"}
