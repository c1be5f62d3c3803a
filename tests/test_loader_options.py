"""The loader's option groups (Order, Sharding, Memory): their validation,
the refusal of the flat keywords they replaced, and the boundary between
the loader and its epoch iterator (an EpochPlan and a callback)."""

from __future__ import annotations

import ast
import dataclasses
import inspect

import numpy as np
import pytest

import slipstream as ss
from slipstream.compiler import Pipeline
from slipstream.fields.decoders import DecodeSource
from slipstream.loader import EpochIterator, EpochPlan, LoaderOptions, iterator
from slipstream.loader.staging import Stager
from slipstream.loader import loader as loader_module
from slipstream.loader.iterator import FailureLog
from slipstream.loader.outputs import resolve_outputs


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """97 samples of a raw 8x6 image and a label, on 4 KiB pages."""
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (97, 8, 6, 3), dtype=np.uint8)
    fields = {"image": ss.RGBImageField(write_mode="raw"), "label": ss.IntField()}
    path = tmp_path_factory.mktemp("options") / "data.slip"
    ss.write(path, [(images[i], i) for i in range(len(images))], fields, workers=0, page_size=4096, verbose=False)
    return path


def batches_of(loader: ss.Loader, epochs: int = 2) -> list[list[np.ndarray]]:
    with loader:
        return [[value.numpy().copy() for value in batch] for _ in range(epochs) for batch in loader]


def assert_same(a: list[list[np.ndarray]], b: list[list[np.ndarray]]) -> None:
    assert len(a) == len(b)
    for one, other in zip(a, b):
        for x, y in zip(one, other, strict=True):
            np.testing.assert_array_equal(x, y)


# ---------------------------------------------------------------- the groups


def test_the_groups_are_exported_frozen_and_have_defaults():
    assert ss.Order is ss.loader.Order and ss.Sharding is ss.loader.Sharding and ss.Memory is ss.loader.Memory
    assert ss.Order() == ss.Order("random", seed=0, window_pages=8)
    assert ss.Sharding() == ss.Sharding(distributed=None, rank=None, world_size=None, drop_last=False)
    assert ss.Memory() == ss.Memory(os_cache=True, pool_pages=None, batches_ahead=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ss.Order().seed = 1
    assert ss.Order(seed=np.int64(7)).seed == 7 and type(ss.Order(seed=np.int64(7)).seed) is int


@pytest.mark.parametrize("make, message", [
    (lambda: ss.Order("shuffled"), r"order must be one of \(.sequential., .random., .quasi_random.\), got .shuffled."),
    (lambda: ss.Order(seed=1.5), "seed must be an integer, got 1.5"),
    (lambda: ss.Order("quasi_random", window_pages=0), "window_pages must be a positive integer, got 0"),
    (lambda: ss.Sharding(rank=2, world_size=2), r"rank 2 is not in \[0, 2\)"),
    (lambda: ss.Sharding(rank=-1), "rank must be a non-negative integer, got -1"),
    (lambda: ss.Sharding(world_size=0), "world_size must be a positive integer, got 0"),
    (lambda: ss.Sharding(drop_last="yes"), "drop_last must be True or False, got 'yes'"),
    (lambda: ss.Sharding(distributed=1), "distributed must be True, False or None, got 1"),
    (lambda: ss.Memory(batches_ahead=0), "batches_ahead must be at least 1, got 0"),
    (lambda: ss.Memory(pool_pages=0), "pool_pages must be a positive integer, got 0"),
    (lambda: ss.Memory(os_cache=None), "os_cache must be True or False, got None"),
])
def test_each_group_validates_its_fields(make, message):
    with pytest.raises(ss.ArgumentError, match=message):
        make()


def test_sharding_resolves_ranks():
    assert ss.Sharding().resolve() == ss.Sharding(distributed=False, rank=0, world_size=1)
    assert ss.Sharding(rank=1, world_size=3, drop_last=True).resolve() == ss.Sharding(True, 1, 3, True)
    assert ss.Sharding(False, rank=1, world_size=3).resolve() == ss.Sharding(False, 0, 1)
    with pytest.raises(ss.ArgumentError, match="distributed=True needs torch.distributed initialised"):
        ss.Sharding(distributed=True).resolve()
    # One of rank and world_size, without torch.distributed to give the other: not every rank loading everything.
    with pytest.raises(ss.ArgumentError, match="rank=1 without world_size needs torch.distributed initialised"):
        ss.Sharding(rank=1).resolve()
    with pytest.raises(ss.ArgumentError, match="world_size=4 without rank needs torch.distributed initialised"):
        ss.Sharding(world_size=4, drop_last=True).resolve()


# ---------------------------------------------------------------- the loader


@pytest.mark.parametrize("kind", ["sequential", "random", "quasi_random"])
def test_the_groups_reach_the_loader(dataset, kind):
    grouped = ss.Loader(dataset, 10, order=ss.Order(kind, seed=5, window_pages=2),
                        sharding=ss.Sharding(rank=1, world_size=2, drop_last=True),
                        memory=ss.Memory(os_cache=False, pool_pages=8, batches_ahead=2))
    assert grouped.memory.store.capacity == 8 and grouped.compiled.slots == 4
    assert (grouped.order, grouped.seed, grouped.window_pages) == (kind, 5, 2)
    assert (grouped.rank, grouped.world_size, grouped.drop_last, grouped.batches_ahead) == (1, 2, True, 2)
    assert len(grouped) == 4
    rank0 = ss.Loader(dataset, 10, order=ss.Order(kind, seed=5, window_pages=2),
                      sharding=ss.Sharding(rank=0, world_size=2, drop_last=True))
    seen = [np.concatenate([b[1].numpy() for b in loader]) for loader in (rank0, grouped)]
    assert len(np.intersect1d(*seen)) == 0 and sum(map(len, seen)) == 80  # two disjoint shares of 40


def test_the_order_shorthand_and_no_arguments_by_position_after_pipelines(dataset):
    short = ss.Loader(dataset, 16, order="quasi_random")
    assert short.options.order == ss.Order("quasi_random")
    with pytest.raises(TypeError, match="positional argument"):
        ss.Loader(dataset, 16, None, "quasi_random")


@pytest.mark.parametrize("name, value, spelling", [
    ("seed", 1, r"order=slipstream\.Order\(seed=\.\.\.\)"),
    ("window_pages", 2, r"order=slipstream\.Order\(window_pages=\.\.\.\)"),
    ("drop_last", True, r"sharding=slipstream\.Sharding\(drop_last=\.\.\.\)"),
    ("world_size", 2, r"sharding=slipstream\.Sharding\(world_size=\.\.\.\)"),
    ("os_cache", False, r"memory=slipstream\.Memory\(os_cache=\.\.\.\)"),
    ("batches_ahead", 2, r"memory=slipstream\.Memory\(batches_ahead=\.\.\.\)"),
])
def test_the_flat_keywords_of_earlier_releases_are_refused_naming_their_group(dataset, name, value, spelling):
    with pytest.raises(ss.ArgumentError, match=rf"unexpected keyword argument '{name}': pass {spelling}"):
        ss.Loader(dataset, 16, **{name: value})


def test_the_loader_keeps_its_messages(dataset):
    with pytest.raises(ss.ArgumentError, match=r"order must be one of .*, got 'shuffled'"):
        ss.Loader(dataset, 16, order="shuffled")
    with pytest.raises(ss.ArgumentError, match=r"rank 3 is not in \[0, 2\)"):
        ss.Loader(dataset, 16, sharding=ss.Sharding(distributed=True, rank=3, world_size=2))
    with pytest.raises(ss.ArgumentError, match="memory must be a slipstream.Memory, got 3"):
        ss.Loader(dataset, 16, memory=3)
    with pytest.raises(ss.ArgumentError, match="unexpected keyword argument 'shuffle': pass order=\"random\""):
        ss.Loader(dataset, 16, shuffle=True)


def test_batch_size_is_a_positive_integer(dataset):
    """As torch's BatchSampler: no bool, no float, nothing below 1; NumPy integers are integers."""
    for size in (0, -1, True, False, 2.0, "8", None):
        with pytest.raises(ss.ArgumentError, match=rf"batch_size must be a positive integer, got {size!r}"):
            ss.Loader(dataset, size, {"image": None})
    loader = ss.Loader(dataset, np.int64(10), {"image": None})
    assert type(loader.batch_size) is int and len(loader) == 10
    assert [len(labels) for (labels,) in loader] == [10] * 9 + [7]


def test_the_options_rebuild_an_equal_loader_and_its_state_dict_is_unchanged(dataset):
    loader = ss.Loader(dataset, 16, order=ss.Order("random", seed=4), sharding=ss.Sharding(drop_last=True))
    assert isinstance(loader.options, LoaderOptions)
    again = ss.Loader(dataset, 16, **vars(loader.options))
    assert again.options == loader.options
    assert set(loader.state_dict()) == {"epoch", "batch", "seed", "order", "window_pages", "repeats",
                                        "selected_round", "batch_size", "world_size", "rank", "samples", "indices",
                                        "dataset", "drop_last", "segments", "resolution"}
    assert loader.state_dict()["order"] == "random" and loader.state_dict()["seed"] == 4
    other = ss.Loader(dataset, 16, order=ss.Order("random", seed=5), sharding=ss.Sharding(drop_last=True))
    with pytest.raises(ss.ArgumentError, match="cannot resume: the state has seed=4, this loader 5"):
        other.load_state_dict(loader.state_dict())
    for one in (loader, again, other):
        one.close()


# ---------------------------------------------------------------- loader and iterator


def test_an_epoch_iterator_runs_from_a_plan_without_any_loader(dataset):
    """The iterator reads a frozen EpochPlan and calls back on_end: built
    here from the parts alone, it gives the loader's batches."""
    loader = ss.Loader(dataset, 16, order=ss.Order("random", seed=2))
    expected = [[value.numpy().copy() for value in batch] for batch in loader]
    reader = ss.Reader(dataset)
    memory = Stager(reader.page_store(os_cache=True, pool_pages=0), reader)
    source = DecodeSource(reader, memory.storage)
    compiled = Pipeline(resolve_outputs({}, reader.fields, source, reader.path)).compile(16, seed=2, slots=4,
                                                                                         verbose=False)
    plan = EpochPlan(epoch=0, batches=tuple(loader.epoch_batches(0)), first_batch=0, pipeline=compiled,
                     memory=memory, source=source, reader=reader, names=("image", "label"), as_dict=False,
                     device=None, on_error="raise", failures=FailureLog(), batches_ahead=2)
    ended = []
    it = EpochIterator(plan, on_end=ended.append)
    got = [[value.numpy().copy() for value in batch] for batch in it]
    assert ended == [it] and it.closed and it.position == len(expected)
    assert_same(expected, got)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.epoch = 1
    loader.close()
    reader.close()


def test_a_compiled_pipeline_follows_records_refreshed_in_place(dataset):
    """Every per-sample array the compiled stages read is one column of the
    DecodeSource: records that change after the pipeline was compiled reach
    its next batch through refresh(), with no new compile."""
    reader = ss.Reader(dataset)
    source = DecodeSource(reader, reader.storage)
    compiled = Pipeline(resolve_outputs({}, reader.fields, source, reader.path)).compile(4, slots=2, verbose=False)
    first = {name: value.copy() for name, value in compiled(np.arange(4)).items()}
    assert source.offsets("image") is source.column("image", "offset", np.uint64)  # one array per column
    changed = reader.metadata.copy()
    changed["label"]["value"][:4] += 100
    changed["image"][[0, 1]] = changed["image"][[1, 0]]  # sample 0 now points at sample 1's pixels, and back
    reader.metadata = changed
    unchanged = compiled(np.arange(4))
    assert np.array_equal(unchanged["label"], first["label"])  # the columns are copies, until refreshed
    source.refresh(np.array([0, 1, 2]))
    now = compiled(np.arange(4))
    assert now["label"].tolist() == [first["label"][k] + (100 if k < 3 else 0) for k in range(4)]
    assert np.array_equal(now["image"][0], first["image"][1]) and np.array_equal(now["image"][1], first["image"][0])
    assert np.array_equal(now["image"][2:], first["image"][2:])
    reader.close()


def test_loader_and_iterator_touch_no_private_attribute_of_each_other():
    """In loader.py and iterator.py, a private attribute (``x._name``) is
    only ever read on ``self``: everything else crosses through the plan,
    the callback, ``position`` and ``closed``."""
    for module in (loader_module, iterator):
        tree = ast.parse(inspect.getsource(module))
        foreign = [(module.__name__, node.lineno, ast.unparse(node)) for node in ast.walk(tree)
                   if isinstance(node, ast.Attribute) and node.attr.startswith("_")
                   and not node.attr.startswith("__")
                   and not (isinstance(node.value, ast.Name) and node.value.id == "self")]
        assert foreign == []
    assert "_Work" not in vars(iterator)
    assert list(inspect.signature(EpochIterator).parameters) == ["plan", "on_end"]


def test_a_loader_checks_and_folds_each_output_s_operations_once(dataset, monkeypatch):
    from slipstream.compiler import graph, pipeline, rewrites
    from slipstream.loader import outputs

    checked, folded = [], []

    def check(name, entries):
        checked.append(name)
        return graph.check_pipeline(name, entries)

    def fold(entries):
        folded.append(list(entries))
        return rewrites.fold(entries)

    for module in (outputs, pipeline):  # every caller of the two, spied on
        monkeypatch.setattr(module, "check_pipeline", check)
        monkeypatch.setattr(module, "fold", fold)
    ss.Loader(dataset, 8, {"image": [ss.ops.CenterCrop(4)]}, verbose=False).close()
    assert sorted(checked) == ["image", "label"] and len(folded) == 2
