"""Compiled stages that Numba can write to its disk cache: a stage holding a
function as a value (its address) cannot be cached, and every new process
compiles it again (tens of seconds for a policy).  Each of these
operations passes functions to shared compiled code; their stages must stay
cacheable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

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


FULL_CACHE = textwrap.dedent("""
    import json, resource, signal, sys, warnings
    import numpy as np
    import slipstream as ss

    limit = int(sys.argv[1])
    ss.write("d.slip", [(np.full((20, 24, 3), k, np.uint8), k) for k in range(8)],
             {"image": ss.RGBImageField(write_mode="raw"), "label": ss.IntField()}, workers=0, verbose=False,
             overwrite=True)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ss.Loader("d.slip", 4, {"image": [ss.ops.RandomResizedCrop(16)], "label": None}, order="sequential",
                       verbose=False) as loader:
            epoch = [[v.numpy().tolist() for v in batch] for batch in loader]
    print(json.dumps({"epoch": epoch, "warnings": [f"{w.category.__name__}: {w.message}" for w in caught]}))
""")


@pytest.mark.parametrize("limit", [500, 10_000], ids=["no-room-for-the-stage-source", "no-room-for-machine-code"])
def test_a_compile_cache_without_room_is_a_warning_and_the_pipeline_runs(tmp_path, limit):
    """Empty compile caches (Numba's and the stages'), whose files cannot
    grow past ``limit`` bytes: the generated stage's source (719 bytes) does
    not fit, or it does but the machine code (20 kB and more a function)
    does not.  Numba raised its OSError from inside the stage's type
    inference, a callee's save failing as the stage typed its call."""
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(tmp_path / "cache"), "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
           "SLIPSTREAM_COMPILE_CACHE_DIR": str(tmp_path / "cache" / "stages")}
    runs = [subprocess.run([sys.executable, "-c", FULL_CACHE, str(size)], capture_output=True, text=True, env=env,
                           cwd=tmp_path, timeout=600) for size in (limit, 1 << 40)]
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    limited, free = (json.loads(run.stdout.splitlines()[-1]) for run in runs)
    assert limited["epoch"] == free["epoch"] and not free["warnings"]
    warnings = limited["warnings"]
    assert 0 < len(warnings) <= 5  # once per cache folder, not once per function (about 20 of them)
    for warning in warnings:
        assert warning.startswith("CacheWarning: the ") and "could not be kept in the compile cache at" in warning
        assert "File too large" in warning
    assert sum("the source of stage 0" in warning for warning in warnings) == (limit == 500)
    assert any("the machine code of " in warning for warning in warnings)
