"""Elastic resume: a loader state taken on W ranks mid-epoch resumes on W'
ranks, and the rest of the epoch hands out exactly the samples not yet
handed out, each once (beyond the padding that equal shares need)."""

from __future__ import annotations

import numpy as np
import pytest

import slipstream as ss

ORDERS = ("sequential", "random", "quasi_random")
SAMPLES, BATCH = 203, 8


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("elastic") / "d.slip"
    images = np.zeros((SAMPLES, 4, 4, 3), np.uint8)
    ss.write(path, {"image": images, "label": np.arange(SAMPLES)}, {"image": ss.RGBImageField(write_mode="raw"),
                                                                    "label": ss.IntField()},
             workers=0, page_size=4096, verbose=False)
    return path


def loaders(path, order, world_size, drop_last=False):
    return [ss.Loader(path, BATCH, {"image": None}, order=ss.Order(order, seed=5), verbose=False,
                      sharding=ss.Sharding(distributed=world_size > 1, rank=r, world_size=world_size,
                                           drop_last=drop_last)) for r in range(world_size)]


def take(loader, batches=None):
    """Labels of the next ``batches`` batches (all: the rest of the epoch), and the loader's state."""
    iterator = iter(loader)
    labels = []
    for k, (label,) in enumerate(iterator):
        labels += label.tolist()
        if batches is not None and k + 1 == batches:
            break
    state = loader.state_dict()
    iterator.close()
    return labels, state


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("new_world", [2, 3, 1, 5])
def test_resume_on_another_world_size_hands_out_the_rest_once(dataset, order, new_world):
    old = loaders(dataset, order, 4)
    first = [take(loader, 3) for loader in old]  # each of 4 ranks gives 3 batches, then the job stops
    given = [s for labels, _ in first for s in labels]
    assert len(given) == 4 * 3 * BATCH and len(set(given)) == len(given)
    new = loaders(dataset, order, new_world)
    for loader in new:
        loader.load_state_dict(first[0][1])  # lockstep: any rank's state serves
    rest = [take(loader)[0] for loader in new]
    lengths = {len(r) for r in rest}
    assert len(lengths) == 1  # equal shares
    handed = given + [s for r in rest for s in r]
    assert set(handed) == set(range(SAMPLES))  # nothing lost
    left = SAMPLES - len(given)
    assert len(handed) - SAMPLES == -left % new_world  # repeats: only the padding of the new shares
    assert set(given).isdisjoint(s for r in rest for s in r)  # nothing handed out before comes again...
    repeats = len(handed) - len(set(handed))
    assert repeats == -left % new_world  # ...beyond the padding
    # Later epochs are those of a fresh run on the new world size.
    fresh = loaders(dataset, order, new_world)
    for loader, f in zip(new, fresh):
        f.set_epoch(1)
        assert take(loader)[0] == take(f)[0]


@pytest.mark.parametrize("order", ORDERS)
def test_two_resumes_in_one_epoch_and_per_rank_states(dataset, order):
    four = loaders(dataset, order, 4)
    states, given = [], []
    for rank, loader in enumerate(four):  # ranks not in lockstep: pass every rank's state
        labels, state = take(loader, 2 + rank % 2)
        given += labels
        states.append(state)
    three = loaders(dataset, order, 3)
    for loader in three:
        loader.load_state_dict(states)
    second = [take(loader, 2) for loader in three]  # stopped again
    given += [s for labels, _ in second for s in labels]
    assert len(given) == len(set(given))
    two = loaders(dataset, order, 2)
    for loader in two:
        loader.load_state_dict(second[1][1])
    rest = [take(loader)[0] for loader in two]
    handed = given + [s for r in rest for s in r]
    assert set(handed) == set(range(SAMPLES))
    assert len(handed) - SAMPLES == (SAMPLES - len(given)) % 2


def test_resume_on_the_same_world_size_is_exact(dataset):
    two = loaders(dataset, "random", 2)
    firsts = [take(loader, 4) for loader in two]
    expected = [take(loader)[0] for loader in loaders(dataset, "random", 2)]
    again = loaders(dataset, "random", 2)
    for loader, (_, state) in zip(again, firsts):
        loader.load_state_dict(state)
    assert [take(loader)[0] for loader in again] == [e[4 * BATCH:] for e in expected]


def test_states_that_cannot_be_combined_are_refused(dataset):
    a, b = loaders(dataset, "random", 2)
    state_a, state_b = take(a, 1)[1], take(b, 1)[1]
    with pytest.raises(ss.ArgumentError, match="not of all 2"):
        loaders(dataset, "random", 3)[0].load_state_dict([state_a, state_a])
    other = dict(state_b, seed=6)
    with pytest.raises(ss.ArgumentError, match="seed=6"):
        loaders(dataset, "random", 3)[0].load_state_dict([state_a, other])
