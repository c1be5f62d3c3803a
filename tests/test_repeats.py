"""Repeated augmentation (``Order(..., repeats=R)``): each sample R times
per epoch, spread over the ranks by striding, each copy with its own random
draws, the epoch cut by the length rule of torchvision's RASampler and
timm's RepeatAugSampler; with real gloo ranks, exact and elastic resume."""

from __future__ import annotations

import collections
import hashlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import slipstream as ss
from slipstream.loader import resume
from slipstream.ops import RandomHorizontalFlip, RandomResizedCrop, ToTensor
from slipstream.ops.batch import BatchColorJitter
from test_distributed import free_port
from test_remote import json_results

COUNTED = 600  # samples of the dataset whose labels are counted (above 2 * 256: the length rule has work to do)
PICTURES, SIZE = 96, 16  # textured samples whose augmented pixels are compared, and their crop size


def texture(index: int) -> np.ndarray:
    """A 40 x 48 picture made with integer arithmetic: gradients and a
    multiplicative hash as noise, so that every crop of it differs."""
    y, x, c = np.ogrid[0:40, 0:48, 0:3]
    noise = ((x * 7919 + y * 104729 + c * 13 + index * 31) * 2654435761 % 2**32) >> 26
    return ((x * (3 + c) + y * (5 - c) + index * 17 + noise) % 256).astype(np.uint8)


@pytest.fixture(scope="module")
def counted(tmp_path_factory):
    path = tmp_path_factory.mktemp("repeats") / "counted.slip"
    ss.write(path, {"image": np.zeros((COUNTED, 4, 4, 3), np.uint8), "label": np.arange(COUNTED)},
             {"image": ss.RGBImageField(write_mode="raw"), "label": ss.IntField()},
             workers=0, page_size=4096, verbose=False)
    return path


@pytest.fixture(scope="module")
def pictures(tmp_path_factory):
    path = tmp_path_factory.mktemp("repeats") / "pictures.slip"
    ss.write(path, [(texture(i), i) for i in range(PICTURES)], {"image": ss.RGBImageField(write_mode="raw"),
                                                                "label": ss.IntField()},
             workers=0, page_size=4096, verbose=False)
    return path


def augmenting(path, order, world_size=1, rank=0, batch_size=8, drop_last=False, image=None):
    """A loader of ``path`` giving (augmented image, label) batches; the
    image's pipeline is a random crop and flip unless ``image`` is given."""
    image = image or [RandomResizedCrop(SIZE), RandomHorizontalFlip()]
    return ss.Loader(path, batch_size, {"image": image}, order=order,
                     sharding=ss.Sharding(distributed=world_size > 1, rank=rank, world_size=world_size,
                                          drop_last=drop_last), verbose=False)


def take(loader, batches=None):
    """(label, SHA-256 of the image) of each sample of the next ``batches``
    batches (all: the rest of the epoch), and the loader's state after them."""
    iterator = iter(loader)
    seen = []
    for k, (image, label) in enumerate(iterator):
        seen += [(int(lab), hashlib.sha256(img.numpy().tobytes()).hexdigest()) for img, lab in zip(image, label)]
        if batches is not None and k + 1 == batches:
            break
    state = loader.state_dict()
    iterator.close()
    return seen, state


# ---------------------------------------------------------------- options

@pytest.mark.parametrize("value", [0, -1, 1.5, "4", True, None])
def test_repeats_that_are_not_a_positive_integer_are_refused(value):
    with pytest.raises(ss.ArgumentError, match=rf"repeats must be a positive integer, got {value!r}"):
        ss.Order("random", repeats=value)


def test_other_bad_repeat_options_are_refused(counted):
    with pytest.raises(ss.ArgumentError, match="repeats must be at most 32768, got 32769"):
        ss.Order("random", repeats=2**15 + 1)
    with pytest.raises(ss.ArgumentError, match="selected_round must be a non-negative integer, got -256"):
        ss.Order("random", repeats=4, selected_round=-256)
    with pytest.raises(ss.ArgumentError, match=r"selected_round=128 rounds the epoch of repeated augmentation, but "
                                               r"repeats=1: pass repeats > 1, or leave selected_round out"):
        ss.Order("random", selected_round=128)
    # 600 samples on 3 ranks, rounded to 512: 170 each; rounded to 1024: none, which torchvision gives silently
    with pytest.raises(ss.ArgumentError, match=r"Order\(repeats=4, selected_round=1024\) gives each of 3 ranks "
                                               r"\(600 // 1024 \* 1024\) // 3 = 0 samples per epoch of .*counted.slip"
                                               r": pass a smaller selected_round"):
        ss.Loader(counted, 8, {"image": None}, order=ss.Order("random", repeats=4, selected_round=1024),
                  sharding=ss.Sharding(rank=0, world_size=3))
    assert len(ss.Loader(counted, 10, {"image": None}, order=ss.Order("random", repeats=4),
                         sharding=ss.Sharding(rank=2, world_size=3))) == 17
    empty = ss.Loader(counted, 10, {"image": None}, order=ss.Order("random", repeats=4), indices=[])
    assert len(empty) == 0 and list(empty) == []  # as without repeats


# ---------------------------------------------------------------- counts, with 2 gloo ranks

WORKER = textwrap.dedent("""
    import json, sys
    import torch.distributed as dist
    import slipstream as ss

    path, port, rank = sys.argv[1], sys.argv[2], int(sys.argv[3])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    cases = {"4 copies, round 256": (ss.Order("random", seed=3, repeats=4), 32, False),
             "4 copies, round 0": (ss.Order("quasi_random", seed=3, repeats=4, selected_round=0), 32, False),
             "2 copies, drop_last": (ss.Order("sequential", repeats=2), 48, True),
             "2 copies, last kept": (ss.Order("random", seed=5, repeats=2), 48, False)}
    result = {}
    for name, (order, batch_size, drop_last) in cases.items():
        loader = ss.Loader(path, batch_size, {"image": None}, order=order,
                           sharding=ss.Sharding(drop_last=drop_last), verbose=False)
        assert (loader.rank, loader.world_size) == (rank, 2)
        epochs = [[b[0].tolist() for b in loader] for _ in range(2)]
        result[name] = {"epochs": epochs, "len": len(loader)}
    dist.barrier()
    dist.destroy_process_group()
    print(json.dumps(result))
""")


@pytest.fixture(scope="module")
def two_ranks(counted, tmp_path_factory):
    """What each of 2 gloo ranks loads in two epochs, per case of WORKER."""
    port, cwd = str(free_port()), tmp_path_factory.mktemp("ranks")
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(counted), port, str(rank)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
             for rank in range(2)]
    return json_results(procs)


@pytest.mark.parametrize("case, repeats, per_rank, batches", [
    ("4 copies, round 256", 4, 256, 8),  # torchvision: (600 // 256 * 256) // 2 = 256 per rank, 512 places
    ("4 copies, round 0", 4, 300, 10),  # timm's selected_round=0: ceil(600 / 2) = 300 per rank
    ("2 copies, drop_last", 2, 240, 5),  # 256 per rank, the last batch of 16 dropped
    ("2 copies, last kept", 2, 256, 6),
])
def test_every_sample_comes_repeats_times_over_the_ranks(two_ranks, case, repeats, per_rank, batches):
    firsts = []
    for epoch in range(2):
        shares = [sum(rank[case]["epochs"][epoch], []) for rank in two_ranks]
        assert [len(share) for share in shares] == [per_rank, per_rank]
        assert [rank[case]["len"] for rank in two_ranks] == [batches, batches]
        counts = collections.Counter(shares[0] + shares[1])
        # The epoch is a prefix of the repeated order: every sample its copies, but the one at the cut.
        full = [sample for sample, count in counts.items() if count == repeats]
        assert len(full) == 2 * per_rank // repeats and len(counts) - len(full) <= 1
        assert max(counts.values()) == repeats
        # Striding: 2 ranks, so each rank gets repeats / 2 copies of each full sample.
        for share in shares:
            mine = collections.Counter(share)
            assert all(mine[sample] == repeats // 2 for sample in full)
        firsts.append(set(full))
    if case != "2 copies, drop_last":  # sequential: the same samples each epoch
        assert firsts[0] != firsts[1]


def test_copies_go_to_different_ranks_where_there_are_enough(counted):
    """4 ranks, 4 copies: every rank gets one copy of each sample (as
    torchvision's sampler): rank r's k-th sample is copy r of the epoch's
    k-th sample, 128 samples each ((600 // 256 * 256) // 4)."""
    order = ss.Order("random", seed=1, repeats=4)
    shares = [ss.Loader(counted, 16, {"image": None}, order=order, sharding=ss.Sharding(rank=r, world_size=4),
                        verbose=False).epoch_samples(0) for r in range(4)]
    assert [share.size for share in shares] == [(600 // 256 * 256) // 4] * 4
    assert all(np.array_equal(shares[0], share) for share in shares)  # place k of each rank: one sample's copies


# ---------------------------------------------------------------- draws

def test_each_copy_draws_anew_and_the_epoch_draws_again_alike(pictures):
    order = ss.Order("random", seed=7, repeats=4, selected_round=0)
    seen, _ = take(augmenting(pictures, order))
    assert len(seen) == PICTURES
    by_sample = collections.defaultdict(list)
    for label, image in seen:
        by_sample[label].append(image)
    assert len(by_sample) == PICTURES // 4
    assert all(len(set(images)) == 4 for images in by_sample.values())  # 4 copies, 4 different crops
    assert take(augmenting(pictures, order))[0] == seen  # the same epoch again: the same pixels
    later = augmenting(pictures, order)
    later.set_epoch(1)
    assert set(take(later)[0]).isdisjoint(seen)


def test_torch_batch_operations_draw_anew_for_each_copy(pictures):
    """A keyed torch operation after the compiled stage (its keys made
    from the batch's draw identities there): each copy jittered apart, copy
    0 as without repeats."""
    def jittered(order, rank=0, world_size=1):
        return augmenting(pictures, order, world_size, rank, image=[ToTensor(), BatchColorJitter(0.4, 0.4, 0.4, 0.1)])

    repeated = ss.Order("random", seed=9, repeats=4, selected_round=0)
    assert [source.jit for source in jittered(repeated).compiled.sources] == [True, False]
    copies = [dict(take(jittered(repeated, r, 4))[0]) for r in range(4)]
    plain = dict(take(jittered(ss.Order("random", seed=9)))[0])
    assert len(copies[0]) == PICTURES // 4
    assert all(copies[0][label] == plain[label] for label in copies[0])
    assert all(len({copy[label] for copy in copies}) == 4 for label in copies[0])


def test_copies_in_one_batch_come_alike_through_every_memory_manager(pictures, tmp_path):
    """One rank gets all 4 copies of a sample, in one batch: the page pool
    and the page store of a sharded dataset hold the sample once per
    batch, or twice, and give the pixels the mapped file gives."""
    order = ss.Order("random", seed=8, repeats=4, selected_round=0)
    mapped = take(augmenting(pictures, order))[0]
    pooled = ss.Loader(pictures, 8, {"image": [RandomResizedCrop(SIZE), RandomHorizontalFlip()]}, order=order,
                       memory=ss.Memory(os_cache=False, pool_pages=8), verbose=False)
    assert take(pooled)[0] == mapped
    ss.write(tmp_path / "sharded", [(texture(i), i) for i in range(PICTURES)],
             {"image": ss.RGBImageField(write_mode="raw"), "label": ss.IntField()}, shards=3, workers=0,
             page_size=4096, verbose=False)
    assert take(augmenting(tmp_path / "sharded", order))[0] == mapped


def test_copy_zero_draws_what_the_sample_draws_without_repeats(pictures):
    """4 ranks, 4 copies: rank 0 gets copy 0 of each sample, whose pixels
    are those the loader without repeats gives the same sample."""
    plain = dict(take(augmenting(pictures, ss.Order("random", seed=7)))[0])
    order = ss.Order("random", seed=7, repeats=4, selected_round=0)
    copies = [dict(take(augmenting(pictures, order, world_size=4, rank=r))[0]) for r in range(4)]
    assert copies[0].keys() == copies[3].keys() and len(copies[0]) == PICTURES // 4
    assert all(image == plain[label] for label, image in copies[0].items())
    for other in copies[1:]:
        assert all(image != plain[label] for label, image in other.items())


def test_repeats_1_is_the_loader_without_repeats(pictures):
    for rank in range(3):
        plain = augmenting(pictures, ss.Order("random", seed=2), world_size=3, rank=rank, batch_size=5)
        once = augmenting(pictures, ss.Order("random", seed=2, repeats=1), world_size=3, rank=rank, batch_size=5)
        assert len(plain) == len(once) == 7
        assert take(plain)[0] == take(once)[0]


def test_an_index_given_several_times_is_several_samples_that_draw_apart(pictures):
    """``indices`` naming a sample 3 times: an epoch 3 times as long, each
    occurrence cropped apart, the same pixels when the epoch runs again;
    with repeated augmentation on top, every copy of every occurrence draws
    apart too."""
    thrice = np.repeat(np.arange(PICTURES), 3)

    def loader(order):
        return ss.Loader(pictures, 8, {"image": [RandomResizedCrop(SIZE), RandomHorizontalFlip()]}, order=order,
                         indices=thrice, verbose=False)

    order = ss.Order("random", seed=3)
    assert len(loader(order)) == 3 * PICTURES // 8
    seen = take(loader(order))[0]
    assert collections.Counter(label for label, _ in seen) == {i: 3 for i in range(PICTURES)}
    assert len(set(seen)) == 3 * PICTURES
    assert take(loader(order))[0] == seen
    both = take(loader(ss.Order("random", seed=3, repeats=2, selected_round=0)))[0]
    assert len(both) == 3 * PICTURES and len(set(both)) == len(both)
    with pytest.raises(ss.ArgumentError, match=r"an index given 3 times, each repeated 16384 times"):
        ss.Loader(pictures, 8, order=ss.Order("random", repeats=1 << 14), indices=thrice, verbose=False)


def test_an_index_given_twice_resumes_exactly_on_two_ranks(pictures):
    twice = np.repeat(np.arange(PICTURES), 2)
    order = ss.Order("random", seed=5)

    def loader(rank):
        return ss.Loader(pictures, 4, {"image": [RandomResizedCrop(SIZE), RandomHorizontalFlip()]}, order=order,
                         indices=twice, sharding=ss.Sharding(distributed=True, rank=rank, world_size=2),
                         verbose=False)

    whole = [take(loader(r))[0] for r in range(2)]
    assert sum(len(w) for w in whole) == 2 * PICTURES and len(set(whole[0] + whole[1])) == 2 * PICTURES
    for rank in range(2):
        state = take(loader(rank), 5)[1]
        again = loader(rank)
        again.load_state_dict(state)
        assert take(again)[0] == whole[rank][5 * 4:]


# ---------------------------------------------------------------- resume

def test_exact_resume_mid_epoch_gives_the_batches_and_draws_to_come(pictures):
    order = ss.Order("random", seed=4, repeats=3, selected_round=16)
    whole = [take(augmenting(pictures, order, 2, r))[0] for r in range(2)]
    assert [len(w) for w in whole] == [(PICTURES // 16 * 16) // 2] * 2
    stopped = [take(augmenting(pictures, order, 2, r), 3)[1] for r in range(2)]
    for rank, state in enumerate(stopped):
        assert state["repeats"] == 3 and state["selected_round"] == 16
        again = augmenting(pictures, order, 2, rank)
        again.load_state_dict(state)
        assert take(again)[0] == whole[rank][3 * 8:]
    other = augmenting(pictures, ss.Order("random", seed=4, repeats=2, selected_round=16), 2, 0)
    with pytest.raises(ss.ArgumentError, match="cannot resume: the state has repeats=3, this loader 2"):
        other.load_state_dict(stopped[0])


@pytest.mark.parametrize("new_world", [1, 2, 3, 5])
def test_elastic_resume_hands_out_the_rest_of_the_epoch_once(pictures, new_world):
    """4 ranks stop after 2 batches; the rest of the epoch on another number
    of ranks hands out exactly the copies (same sample, same draws) not yet
    handed out, beyond the padding that equal shares need."""
    order = ss.Order("random", seed=6, repeats=4, selected_round=0)
    epoch = collections.Counter(s for r in range(4) for s in take(augmenting(pictures, order, 4, r, 4))[0])
    assert sum(epoch.values()) == PICTURES and len(epoch) == PICTURES  # 24 samples, 4 distinct copies each
    stopped = [take(augmenting(pictures, order, 4, r, 4), 2) for r in range(4)]
    given = collections.Counter(s for seen, _ in stopped for s in seen)
    assert sum(given.values()) == 4 * 2 * 4
    rest = collections.Counter()
    for rank in range(new_world):
        loader = augmenting(pictures, order, new_world, rank, 4)
        loader.load_state_dict(stopped[0][1])  # lockstep: any rank's state serves
        rest.update(take(loader)[0])
    left = PICTURES - sum(given.values())
    padding = -left % new_world
    assert sum(rest.values()) == left + padding
    assert not set(rest) & set(given)  # nothing handed out before comes again
    assert set(rest) | set(given) == set(epoch)  # nothing lost
    assert sum((rest - collections.Counter(set(rest))).values()) == padding  # repeated only as padding


def test_states_before_repeated_augmentation_resume_only_loaders_without_repeats(pictures):
    older = {key: value for key, value in take(augmenting(pictures, "random"), 2)[1].items()
             if key not in resume.REPEATS}
    plain = augmenting(pictures, "random")
    plain.load_state_dict(older)
    assert take(plain)[0] == take(augmenting(pictures, "random"))[0][2 * 8:]
    repeated = augmenting(pictures, ss.Order("random", repeats=2, selected_round=0))
    with pytest.raises(ss.ArgumentError, match=r"cannot resume: the state does not record repeats \(it was written "
                                               r"before slipstream recorded it\) and this loader repeats each sample "
                                               r"2 times; this loader has repeats=2"):
        repeated.load_state_dict(older)
    with pytest.raises(ss.ArgumentError, match="cannot resume: the state has no 'selected_round'"):
        plain.load_state_dict(dict(older, repeats=1))
