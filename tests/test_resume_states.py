"""Forged and mismatched resume states: ``Loader.load_state_dict`` checks the
whole state against the loader before changing anything, refuses what does
not fit with an ArgumentError naming the field and both values, and leaves
a loader that refused a state exactly as it was.  Valid states, on the same
world size and on another, still resume exactly."""

from __future__ import annotations

import json

import numpy as np
import pytest

import slipstream as ss
from slipstream.loader import resume
from test_elastic import take

SAMPLES, BATCH = 64, 8


def write(path, labels):
    """A dataset of raw 12x10 images over 4 KiB pages (several pages, so that
    ``quasi_random``'s window matters) whose labels are ``labels``."""
    images = np.zeros((len(labels), 12, 10, 3), np.uint8)
    ss.write(path, {"image": images, "label": np.asarray(labels)}, {"image": ss.RGBImageField(write_mode="raw"),
                                                                    "label": ss.IntField()},
             workers=0, page_size=4096, verbose=False)
    return path


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return write(tmp_path_factory.mktemp("resume") / "d.slip", range(SAMPLES))


@pytest.fixture(scope="module")
def other_dataset(tmp_path_factory):
    """As many samples as ``dataset``, other labels: another dataset."""
    return write(tmp_path_factory.mktemp("resume_other") / "d.slip", range(100, 100 + SAMPLES))


def loader(path, order="random", world_size=1, rank=0, **options):
    window = options.pop("window_pages", 8)
    sharding = ss.Sharding(rank=rank, world_size=world_size) if world_size > 1 else ss.Sharding()
    return ss.Loader(path, BATCH, {"image": None}, order=ss.Order(order, seed=3, window_pages=window),
                     sharding=sharding, verbose=False, **options)


@pytest.fixture
def state(dataset):
    """A genuine state: epoch 1, after 3 batches, on one rank."""
    saver = loader(dataset)
    saver.set_epoch(1)
    return take(saver, 3)[1]


# ---------------------------------------------------------------- forged and mismatched states

FORGED = {
    # the batch: out of range, of the wrong type
    "negative batch": (lambda s: dict(s, batch=-2), r"the state has batch=-2: it must be an integer in \[0, "),
    "huge batch": (lambda s: dict(s, batch=10**6), r"the state has batch=1000000 \(rank 0 of 1\), but a rank's share "
                                                   r"of the 64 samples left in the epoch is 8 batches: it must lie "
                                                   r"in \[0, 8\]"),
    "batch beyond the share": (lambda s: dict(s, batch=9), r"the state has batch=9 \(rank 0 of 1\).* it must lie in \[0, 8\]"),
    "float batch": (lambda s: dict(s, batch=1.5), r"the state has batch=1.5: it must be an integer"),
    "string batch": (lambda s: dict(s, batch="3"), r"the state has batch='3': it must be an integer"),
    "batch of 5000 digits": (lambda s: dict(s, batch=10**5000), r"the state has batch=<an integer of 16610 bits>: "
                                                                r"it must be an integer in \[0, "),
    "bool batch": (lambda s: dict(s, batch=True), r"the state has batch=True: it must be an integer"),
    # the epoch
    "negative epoch": (lambda s: dict(s, epoch=-1), r"the state has epoch=-1: it must be an integer in "
                                                    r"\[0, 9223372036854775807\]"),
    "epoch beyond 64 bits": (lambda s: dict(s, epoch=2**64), r"the state has epoch=18446744073709551616: it must "
                                                             r"be an integer in \[0, 9223372036854775807\]"),
    # the world size and rank
    "zero world size": (lambda s: dict(s, world_size=0), r"the state has world_size=0: it must be an integer in "
                                                         r"\[1, 1048576\]"),
    "huge world size": (lambda s: dict(s, world_size=10**9), r"the state has world_size=1000000000: it must be an "
                                                             r"integer in \[1, 1048576\]"),
    "rank beyond the world": (lambda s: dict(s, rank=2, world_size=2), r"the state has rank=2: it must be an "
                                                                       r"integer in \[0, 1\]"),
    "negative rank": (lambda s: dict(s, rank=-1), r"the state has rank=-1: it must be an integer in \[0, 0\]"),
    # the segments
    "negative segment position": (lambda s: dict(s, segments=[[4, [-3, 0, 0, 0]]]),
                                  r"the state has segments\[0\]\[1\]\[0\]=-3: it must be an integer in \[0, "),
    "segment position beyond its share": (lambda s: dict(s, segments=[[4, [0, 0, 3, 0]]]),
                                          r"the state has segments\[0\]\[1\]\[2\]=3 \(rank 2 of 4\), but a rank's "
                                          r"share of the 64 samples left in the epoch is 2 batches"),
    "second segment beyond what the first left": (lambda s: dict(s, segments=[[2, [2, 2]], [2, [3, 0]]]),
                                                  r"the state has segments\[1\]\[1\]\[0\]=3 \(rank 0 of 2\), but a rank's share of "
                                                  r"the 32 samples left in the epoch is 2 batches"),
    "batch beyond what the segments left": (lambda s: dict(s, segments=[[2, [2, 2]]], batch=5),
                                            r"the state has batch=5 \(rank 0 of 1\), but a rank's share of the 32 samples left "
                                            r"in the epoch is 4 batches"),
    "a million segments": (lambda s: dict(s, segments=[[1, [0]]] * 10**6),
                           r"the state has 1000000 segments: at most 1024 runs on other world sizes"),
    "segment of a billion ranks": (lambda s: dict(s, segments=[[10**9, [0]]]),
                                   r"the state has segments\[0\]\[0\]=1000000000: it must be an integer in "
                                   r"\[1, 1048576\]"),
    "segments of too many ranks together": (lambda s: dict(s, segments=[[2**20, [0] * 2**20]] * 5),
                                            r"the state's segments hold 5242880 positions together: at most 4194304 "
                                            r"are allowed"),
    "segment with too few positions": (lambda s: dict(s, segments=[[3, [0, 0]]]),
                                       r"the state has segments\[0\] on 3 ranks with 2 positions: it needs one "
                                       r"per rank"),
    "segment of the wrong shape": (lambda s: dict(s, segments=[[2]]),
                                   r"the state has segments\[0\]=\[2\]: it must be \[world_size, positions\]"),
    "segments as a string": (lambda s: dict(s, segments="[]"),
                             r"the state has segments='\[\]': it must be a list of \[world_size, positions\]"),
    # what the state was taken over
    "another window": (lambda s: dict(s, window_pages=16), r"the state has window_pages=16, this loader 8"),
    "other indices": (lambda s: dict(s, indices="32 indices in [0, 31], CRC-32 00000000"),
                      r"the state has indices='32 indices in \[0, 31\], CRC-32 00000000', this loader "
                      r"'64 indices in \[0, 63\], CRC-32 [0-9a-f]{8}' \(the loaders' indices= differ\)"),
    "other samples": (lambda s: dict(s, samples=32), r"the state has samples=32, this loader 64"),
    "another seed": (lambda s: dict(s, seed=4), r"the state has seed=4, this loader 3"),
    "another order": (lambda s: dict(s, order="sequential"), r"the state has order='sequential', this loader "
                                                             r"'random'"),
    "another batch size": (lambda s: dict(s, batch_size=16), r"the state has batch_size=16, this loader 8"),
    "another drop_last": (lambda s: dict(s, drop_last=True), r"the state has drop_last=True, this loader False"),
    "drop_last as an int": (lambda s: dict(s, drop_last=0), r"the state has drop_last=0 \(int\), this loader False "
                                                            r"\(bool\)"),
    "seed as a string": (lambda s: dict(s, seed="3"), r"the state has seed='3' \(str\), this loader 3 \(int\)"),
    "window as None": (lambda s: dict(s, window_pages=None), r"the state has window_pages=None \(NoneType\), this "
                                                             r"loader 8 \(int\)"),
    # missing fields
    "no epoch": (lambda s: {k: v for k, v in s.items() if k != "epoch"}, r"the state has no 'epoch' "
                                                                          r"\(Loader.state_dict\(\) records epoch, "),
    "no segments": (lambda s: {k: v for k, v in s.items() if k != "segments"}, r"the state has no 'segments'"),
    "no seed": (lambda s: {k: v for k, v in s.items() if k != "seed"}, r"the state has no 'seed'"),
    "some later fields only": (lambda s: {k: v for k, v in s.items() if k != "indices"},
                               r"the state has no 'indices'"),
    "an empty dict": (lambda s: {}, r"the state has no '"),
    # not a state at all
    "a string": (lambda s: "state", r"a state is the dict Loader.state_dict\(\) returns \(or the list of every "
                                    r"rank's\), got str 'state'"),
    "an int": (lambda s: 7, r"a state is the dict .* got int 7"),
    "None": (lambda s: None, r"a state is the dict .* got NoneType None"),
    "an empty list": (lambda s: [], r"load_state_dict needs a state \(or the list of every rank's state\), got an "
                                    r"empty list"),
    "a list of strings": (lambda s: ["a", "b"], r"state 0 of the list is str 'a', not the dict"),
    "a list holding an int": (lambda s: [s, 3], r"state 1 of the list is int 3, not the dict"),
}


@pytest.mark.parametrize("name", list(FORGED))
def test_a_forged_state_is_refused_by_field_and_the_loader_is_unchanged(dataset, state, name):
    forge, message = FORGED[name]
    target = loader(dataset)
    target.load_state_dict(state)  # a loader somewhere mid-run: epoch 1, batch 3
    with pytest.raises(ss.ArgumentError, match="cannot resume: " + message):
        target.load_state_dict(forge(state))
    fresh = loader(dataset)
    fresh.load_state_dict(state)
    assert take(target) == take(fresh)  # the same batches, and the same state after them
    assert target.epoch == 2


def test_a_state_from_another_dataset_is_refused(dataset, other_dataset):
    theirs = take(loader(other_dataset), 2)[1]
    mine = loader(dataset)
    with pytest.raises(ss.ArgumentError, match=r"cannot resume: the state has dataset='64 samples, records CRC-32 "
                                               r"[0-9a-f]{8}', this loader '64 samples, records CRC-32 [0-9a-f]{8}' "
                                               r"\(another dataset, or this one written again\)"):
        mine.load_state_dict(theirs)
    assert take(mine)[0] == take(loader(dataset))[0]


def test_a_state_over_other_indices_is_refused(dataset):
    first_half = ss.Loader(dataset, BATCH, {"image": None}, indices=range(32), verbose=False)
    second_half = ss.Loader(dataset, BATCH, {"image": None}, indices=range(32, 64), verbose=False)
    state = take(first_half, 1)[1]
    with pytest.raises(ss.ArgumentError, match=r"cannot resume: the state has indices='32 indices in \[0, 31\], "
                                               r"CRC-32 [0-9a-f]{8}', this loader '32 indices in \[32, 63\], "
                                               r"CRC-32 [0-9a-f]{8}'"):
        second_half.load_state_dict(state)
    reordered = ss.Loader(dataset, BATCH, {"image": None}, indices=range(31, -1, -1), verbose=False)
    with pytest.raises(ss.ArgumentError, match=r"the state has indices='32 indices in \[0, 31\], CRC-32 [0-9a-f]{8}', "
                                               r"this loader '32 indices in \[0, 31\], CRC-32 [0-9a-f]{8}'"):
        reordered.load_state_dict(state)  # the same samples in another order: a random order of them differs


def test_a_state_with_another_window_is_refused_where_the_window_shapes_the_order(dataset):
    narrow = loader(dataset, "quasi_random", window_pages=1)
    wide = loader(dataset, "quasi_random", window_pages=8)
    assert take(narrow)[0] != take(wide)[0]  # the window changes the order of this dataset
    with pytest.raises(ss.ArgumentError, match="cannot resume: the state has window_pages=1, this loader 8"):
        wide.load_state_dict(take(narrow, 2)[1])


def test_states_of_different_runs_are_refused_together(dataset):
    ranks = [loader(dataset, world_size=2, rank=r) for r in range(2)]
    states = [take(one, 1)[1] for one in ranks]
    target = loader(dataset, world_size=3)
    with pytest.raises(ss.ArgumentError, match=r"cannot resume: the states come from different runs: one has "
                                               r"epoch=0, another 1"):
        target.load_state_dict([states[0], dict(states[1], epoch=1)])
    with pytest.raises(ss.ArgumentError, match=r"cannot resume: the states come from different runs: one has "
                                               r"segments=\(\), another \(\(1, \(1,\)\),\)"):
        target.load_state_dict([states[0], dict(states[1], segments=[[1, [1]]])])
    with pytest.raises(ss.ArgumentError, match=r"cannot resume: the states are of ranks \[1, 1\], not of all 2"):
        target.load_state_dict([states[1], states[1]])


def test_the_largest_allowed_sizes_load_and_one_more_is_refused(dataset, state):
    """A state at the bounds loads (and its epoch runs); one past them is
    refused before anything is allocated for it."""
    widest = dict(state, epoch=0, batch=0, world_size=resume.MAX_WORLD_SIZE, rank=resume.MAX_WORLD_SIZE - 1)
    target = loader(dataset)
    target.load_state_dict(widest)  # a million ranks handed out nothing: the whole epoch is left
    assert take(target)[0] == take(loader(dataset))[0]
    longest = dict(state, segments=[[1, [0]]] * resume.MAX_SEGMENTS)  # runs that handed out nothing
    target.load_state_dict(longest)
    fresh = loader(dataset)
    fresh.load_state_dict(state)
    assert take(target)[0] == take(fresh)[0]
    with pytest.raises(ss.ArgumentError, match="cannot resume: the state has world_size=1048577: it must be an "
                                               r"integer in \[1, 1048576\]"):
        target.load_state_dict(dict(widest, world_size=resume.MAX_WORLD_SIZE + 1))
    with pytest.raises(ss.ArgumentError, match="cannot resume: the state has 1025 segments: at most 1024"):
        target.load_state_dict(dict(state, segments=[[1, [0]]] * (resume.MAX_SEGMENTS + 1)))


# ---------------------------------------------------------------- states of the version before

def without_later_fields(state):
    """``state`` as the version before this one wrote it: no dataset, indices or window."""
    return {key: value for key, value in state.items() if key not in resume.LATER}


def test_a_state_of_the_version_before_resumes_a_loader_over_the_whole_dataset(dataset, state):
    old = without_later_fields(state)
    resumed = loader(dataset)
    resumed.load_state_dict(old)
    fresh = loader(dataset)
    fresh.load_state_dict(state)
    assert take(resumed) == take(fresh)


def test_a_state_of_the_version_before_is_refused_where_its_indices_or_window_cannot_be_confirmed(dataset):
    half = ss.Loader(dataset, BATCH, {"image": None}, indices=range(32), verbose=False)
    old = without_later_fields(take(half, 1)[1])
    with pytest.raises(ss.ArgumentError, match=r"cannot resume: the state does not record indices \(it was written "
                                               r"before slipstream recorded it\) and this loader does not load the "
                                               r"whole dataset in its order; this loader has indices='32 indices in "
                                               r"\[0, 31\]"):
        ss.Loader(dataset, BATCH, {"image": None}, indices=range(32), verbose=False).load_state_dict(old)
    narrow = loader(dataset, "quasi_random", window_pages=2)
    old = without_later_fields(take(narrow, 1)[1])
    with pytest.raises(ss.ArgumentError, match=r"cannot resume: the state does not record window_pages .* this "
                                               r"loader's quasi_random order uses a window other than the default 8; "
                                               r"this loader has window_pages=2"):
        loader(dataset, "quasi_random", window_pages=2).load_state_dict(old)
    default = loader(dataset, "quasi_random")
    default.load_state_dict(without_later_fields(take(loader(dataset, "quasi_random"), 2)[1]))
    assert take(default)[0] == take(loader(dataset, "quasi_random"))[0][2 * BATCH:]


# ---------------------------------------------------------------- valid states still resume exactly

@pytest.mark.parametrize("order", ["sequential", "random", "quasi_random"])
@pytest.mark.parametrize("world_size", [1, 2])
def test_a_valid_state_resumes_exactly_on_the_same_world_size(dataset, order, world_size):
    whole = [take(loader(dataset, order, world_size, r))[0] for r in range(world_size)]
    for r in range(world_size):
        state = take(loader(dataset, order, world_size, r), 2)[1]
        state = json.loads(json.dumps(state))  # a state is plain data: it survives JSON (and torch.save)
        resumed = loader(dataset, order, world_size, r)
        resumed.load_state_dict(state)
        assert take(resumed)[0] == whole[r][2 * BATCH:]


@pytest.mark.parametrize("order", ["random", "quasi_random"])
@pytest.mark.parametrize("new_world", [1, 3])
def test_a_valid_state_resumes_on_another_world_size(dataset, order, new_world):
    old = [loader(dataset, order, 2, r) for r in range(2)]
    first = [take(one, 1) for one in old]
    given = [s for labels, _ in first for s in labels]
    new = [loader(dataset, order, new_world, r) for r in range(new_world)]
    for one in new:
        one.load_state_dict(json.loads(json.dumps(first[0][1])))
    rest = [s for one in new for s in take(one)[0]]
    assert set(given).isdisjoint(rest) and set(given) | set(rest) == set(range(SAMPLES))
    assert len(rest) - len(set(rest)) == -(SAMPLES - len(given)) % new_world  # repeats: the padding only
    every_rank = [loader(dataset, order, new_world, r) for r in range(new_world)]
    for one in every_rank:
        one.load_state_dict([state for _, state in first])
    assert [s for one in every_rank for s in take(one)[0]] == rest


def test_repeated_indices_are_each_handed_out_once_across_an_elastic_resume(dataset):
    """Indices that name a sample twice (oversampling) hand out each of the
    two places once: what a stopped job handed out is known by place in the
    order, not by sample."""
    twice = list(range(SAMPLES)) * 2
    old = [ss.Loader(dataset, BATCH, {"image": None}, indices=twice, sharding=ss.Sharding(rank=r, world_size=2),
                     verbose=False) for r in range(2)]
    first = [take(one, 3) for one in old]
    given = [s for labels, _ in first for s in labels]
    resumed = ss.Loader(dataset, BATCH, {"image": None}, indices=twice, verbose=False)
    resumed.load_state_dict(first[0][1])
    rest = take(resumed)[0]
    assert len(given) + len(rest) == 2 * SAMPLES
    assert sorted(given + rest) == sorted(twice)


def test_a_state_taken_after_the_loop_is_left_resumes_where_it_stopped(dataset):
    """A ``break``, or an exception (a preemption) caught outside the loop,
    drops the iterator: the state still says where it stopped, as torchdata's
    StatefulDataLoader's does, until the loader moves (another ``iter()``,
    ``set_epoch``, ``load_state_dict``)."""
    whole = take(loader(dataset))[0]

    def left_by_break(source):
        for k, _ in enumerate(source):
            if k == 2:
                break

    def left_by_exception(source):
        try:
            for k, _ in enumerate(source):
                if k == 2:
                    raise KeyboardInterrupt
        except KeyboardInterrupt:
            pass

    for leave in (left_by_break, left_by_exception):
        stopped = loader(dataset)
        leave(stopped)
        state = stopped.state_dict()
        assert (state["epoch"], state["batch"]) == (0, 3)
        resumed = loader(dataset)
        resumed.load_state_dict(state)
        assert take(resumed)[0] == whole[3 * BATCH:]
        stopped.set_epoch(0)
        assert stopped.state_dict()["batch"] == 0
    again = loader(dataset)
    left_by_break(again)
    assert take(again, 1) == (whole[:BATCH], dict(state, batch=1))  # the loader's own next iter() starts over


@pytest.mark.parametrize("old_world", [1, 2])
def test_set_epoch_of_the_epoch_a_loaded_state_resumes_keeps_the_resume(dataset, old_world):
    """The training loop's ``loader.set_epoch(epoch)`` at the top of each
    epoch, after ``load_state_dict``, resumes where the state says (on the
    same world size and on another); another epoch starts from its start."""
    saver = loader(dataset, world_size=old_world)
    saver.set_epoch(1)
    given, state = take(saver, 3)
    expected = loader(dataset)
    expected.load_state_dict(state)
    rest = take(expected)[0]
    assert len(rest) == SAMPLES - old_world * len(given) and set(rest).isdisjoint(given)
    resumed = loader(dataset)
    resumed.load_state_dict(state)
    resumed.set_epoch(1)
    assert take(resumed)[0] == rest
    resumed.set_epoch(1)  # epoch 1 again, no state pending: the whole epoch
    assert sorted(take(resumed)[0]) == list(range(SAMPLES))
    other = loader(dataset)
    other.load_state_dict(state)
    other.set_epoch(2)
    assert sorted(take(other)[0]) == list(range(SAMPLES))


def test_a_running_epoch_goes_on_unchanged_after_a_refused_state(dataset, state):
    running = loader(dataset)
    iterator = iter(running)
    first = [next(iterator)[0].tolist() for _ in range(2)]
    with pytest.raises(ss.ArgumentError, match="cannot resume: the state has epoch=-1"):
        running.load_state_dict(dict(state, epoch=-1))
    rest = [label.tolist() for (label,) in iterator]
    expected = take(loader(dataset))[0]
    assert [s for batch in first + rest for s in batch] == expected
    assert running.epoch == 1


def test_numbers_held_as_numpy_integers_are_accepted(dataset, state):
    as_numpy = {key: np.int64(value) if type(value) is int else value for key, value in state.items()}
    resumed = loader(dataset)
    resumed.load_state_dict(as_numpy)
    fresh = loader(dataset)
    fresh.load_state_dict(state)
    assert take(resumed) == take(fresh)
