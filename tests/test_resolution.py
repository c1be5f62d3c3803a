"""Progressive resizing: a crop's output size as a value within its
largest, changed between epochs (a ResolutionSchedule, or
Loader.set_resolution) without compiling, resumed exactly."""

from __future__ import annotations

import numpy as np
import pytest

import slipstream as ss
from jpeg_corpus import make_sample
from slipstream.ops import CenterCrop, Normalize, RandomHorizontalFlip, RandomResizedCrop, ResolutionSchedule

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """40 JPEG photos of varied sizes, labelled."""
    samples = [make_sample(60 + 7 * (i % 5), 80 + 5 * (i % 3), "RGB", 2, seed=i) for i in range(40)]
    path = tmp_path_factory.mktemp("resolution") / "photos.slip"
    ss.write(path, [(sample.data, i) for i, sample in enumerate(samples)],
             {"image": ss.RGBImageField(), "label": ss.IntField()}, workers=0, verbose=False)
    return path


def pipelines(crop) -> dict:
    return {"image": [crop, RandomHorizontalFlip(), Normalize(MEAN, STD)]}


def epoch(loader, number: int) -> list[np.ndarray]:
    loader.set_epoch(number)
    return [batch[0].numpy().copy() for batch in loader]


def test_the_schedule_is_ffcvs_ramp():
    """FFCV's get_resolution (train_imagenet.py), written out independently:
    min_res to start_ramp, max_res from end_ramp, between them the linear
    ramp rounded to the nearest multiple of 32."""
    schedule = ResolutionSchedule()  # FFCV's ResNet-50 configurations: 160 to 192 over epochs 65 to 76
    for number in range(90):
        ramp = np.interp([number], [65, 76], [160, 192])[0]
        expected = 160 if number <= 65 else 192 if number >= 76 else int(np.round(ramp / 32)) * 32
        assert schedule(number) == expected, number
    assert [schedule(e) for e in (65, 70, 71, 76)] == [160, 160, 192, 192]
    with pytest.raises(ss.ArgumentError, match="ResolutionSchedule: needs min_res <= max_res"):
        ResolutionSchedule(min_res=200, max_res=100)


def test_a_scheduled_crop_gives_each_epoch_its_size_from_one_compiled_stage(dataset):
    """Every epoch at its scheduled size, from one compile; each epoch's
    batches are those of a crop built at that size (same seed)."""
    schedule = ResolutionSchedule(min_res=24, max_res=48, start_ramp=0, end_ramp=2, step=12)
    loader = ss.Loader(dataset, 8, pipelines(RandomResizedCrop(schedule)), order=ss.Order("random", seed=3))
    sizes = {}
    for number in range(3):
        batches = epoch(loader, number)
        sizes[number] = {b.shape for b in batches}
        assert all(b.flags.c_contiguous for b in batches)
        fixed = ss.Loader(dataset, 8, pipelines(RandomResizedCrop(schedule(number))),
                          order=ss.Order("random", seed=3))
        for ours, theirs in zip(batches, epoch(fixed, number), strict=True):
            np.testing.assert_array_equal(ours, theirs)
    assert sizes == {0: {(8, 3, 24, 24)}, 1: {(8, 3, 36, 36)}, 2: {(8, 3, 48, 48)}}
    (stage,) = loader.compiled.dispatchers
    assert len(stage.signatures) == 1  # one machine code for every size
    assert loader.compiled.memory_plan() == ss.Loader(dataset, 8, pipelines(RandomResizedCrop(48)),
                                                      order=ss.Order("random", seed=3)).compiled.memory_plan()


def test_set_resolution_mid_training_resumes_exactly(dataset):
    crop = RandomResizedCrop(32, max_size=48)
    loader = ss.Loader(dataset, 8, pipelines(crop), order=ss.Order("random", seed=5))
    assert {b.shape for b in epoch(loader, 0)} == {(8, 3, 32, 32)}
    loader.set_resolution((40, 44))
    assert loader.resolution == (40, 44)
    iterator = iter(loader)
    next(iterator)
    next(iterator)
    state = loader.state_dict()
    assert state["resolution"] == [40, 44]
    rest = [batch[0].numpy().copy() for batch in iterator]
    assert {b.shape for b in rest} == {(8, 3, 40, 44)}
    fresh = ss.Loader(dataset, 8, pipelines(RandomResizedCrop(32, max_size=48)), order=ss.Order("random", seed=5))
    fresh.load_state_dict(state)
    resumed = [batch[0].numpy().copy() for batch in fresh]
    assert len(resumed) == len(rest) == 3
    for ours, theirs in zip(rest, resumed):
        np.testing.assert_array_equal(ours, theirs)
    loader.set_resolution(None)  # back to the crop's own size
    assert {b.shape for b in epoch(loader, 2)} == {(8, 3, 32, 32)}


def test_a_resizable_center_crop_follows_the_resolution(dataset):
    loader = ss.Loader(dataset, 8, {"image": [CenterCrop(24, max_size=(40, 40)), Normalize(MEAN, STD)]},
                       order="sequential")
    loader.set_resolution(36)
    (first, *_), fixed = epoch(loader, 0), ss.Loader(dataset, 8, {"image": [CenterCrop(36), Normalize(MEAN, STD)]},
                                                      order="sequential")
    np.testing.assert_array_equal(first, epoch(fixed, 0)[0])


def test_resolutions_a_loader_cannot_take_are_refused(dataset):
    loader = ss.Loader(dataset, 8, pipelines(RandomResizedCrop(32, max_size=48)))
    with pytest.raises(ss.ArgumentError, match=r"set_resolution: \(64, 64\) is larger than the largest size of "):
        loader.set_resolution(64)
    with pytest.raises(ss.ArgumentError, match="set_resolution: a resolution is None, an int or an"):
        loader.set_resolution(0)
    fixed = ss.Loader(dataset, 8, pipelines(RandomResizedCrop(32)))
    with pytest.raises(ss.ArgumentError, match="set_resolution: no crop of these pipelines can change its size"):
        fixed.set_resolution(24)
    with pytest.raises(ss.ArgumentError, match=r"RandomResizedCrop: size \(64, 64\) is larger than max_size"):
        RandomResizedCrop(64, max_size=48)
