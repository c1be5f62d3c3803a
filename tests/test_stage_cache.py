"""Compiled stages that Numba can write to its disk cache: a stage holding a
function as a value (its address) cannot be cached, and every new process
compiles it again (tens of seconds for a policy).  Each of these
operations passes functions to shared compiled code; their stages must stay
cacheable."""

from __future__ import annotations

import pytest
from jpeg_corpus import make_sample

import slipstream as ss
from slipstream.ops import AugMix, Normalize, RandomErasing, RandomResizedCrop, TrivialAugmentWide


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    path = tmp_path_factory.mktemp("cache") / "photos.slip"
    ss.write(path, [(make_sample(72, 96, seed=k).data, k) for k in range(8)],
             {"image": ss.RGBImageField(), "label": ss.IntField()}, workers=0, verbose=False)
    return path


# TrivialAugmentWide stands for the policies that share Policy.generate_code
# (RandAugment, AutoAugment, TimmRandAugment); AugMix calls the steps itself.
@pytest.mark.parametrize("operation", [TrivialAugmentWide(), AugMix()], ids=lambda op: type(op).__name__)
def test_a_policys_stage_can_be_cached(photos, operation):
    pipeline = [RandomResizedCrop(48), operation, Normalize(), RandomErasing(1.0, value="random")]
    loader = ss.Loader(photos, 8, {"image": pipeline}, verbose=False)
    next(iter(loader))
    compiled = [result for fn in loader.compiled.dispatchers for result in fn.overloads.values()]
    assert compiled
    for result in compiled:
        assert not result.library.has_dynamic_globals, f"{operation!r}: its stage holds addresses Numba cannot cache"
