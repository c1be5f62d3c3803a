"""``loader.stats()``: what the training loop waited for and where the
loader's time went, counted by both threads; reset; the epoch's log line;
the torch.profiler ranges."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest
import torch

import slipstream as ss
from slipstream.loader.stats import PHASES, LoaderStats
from slipstream.ops import RandomHorizontalFlip, RandomResizedCrop

SAMPLES, BATCH, STEP = 96, 8, 0.02


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("stats") / "images.slip"
    images = np.random.default_rng(0).integers(0, 256, (SAMPLES, 48, 48, 3), np.uint8)
    ss.write(path, {"image": images, "label": np.arange(SAMPLES)},
             {"image": ss.RGBImageField(), "label": ss.IntField()}, verbose=False)
    return path


def loader(path, **options):
    return ss.Loader(path, BATCH, {"image": [RandomResizedCrop(32), RandomHorizontalFlip()]}, verbose=False,
                     **options)


def test_a_training_step_slower_than_the_loader_is_counted_as_step(dataset):
    """Each step sleeps: the step time covers the sleeps, the batches and
    samples are counted, the loader thread's phases and the stage add up
    to no more than the epoch took, and the loader is not the bottleneck."""
    slow = loader(dataset)
    began = time.perf_counter()
    for _ in slow:
        time.sleep(STEP)
    elapsed = time.perf_counter() - began
    stats = slow.stats()
    assert (stats.epoch, stats.batches, stats.samples, stats.skipped) == (0, SAMPLES // BATCH, SAMPLES, 0)
    assert STEP * (SAMPLES // BATCH) <= stats.step <= elapsed
    assert stats.waiting + stats.step <= elapsed
    assert set(stats.phases) == set(PHASES) and all(v >= 0 for v in stats.phases.values())
    assert sum(stats.phases.values()) <= elapsed
    assert list(stats.stages) == ["stage 0 (jit)"] and 0 < stats.stages["stage 0 (jit)"] <= stats.phases["pipeline"]
    # The stage's time shared among its operations: the decode and crop above the label's copy.
    assert set(stats.operations) == {"image: CropDecoder", "label: ArraySource"}
    assert sum(stats.operations.values()) == pytest.approx(stats.stages["stage 0 (jit)"])
    assert stats.operations["image: CropDecoder"] > 10 * stats.operations["label: ArraySource"]
    assert stats.phases["ahead"] > 0  # the loader waited for room: it keeps up
    assert not stats.bottleneck and stats.waiting_share < 0.5
    assert 0 < stats.samples_per_s <= SAMPLES / (STEP * (SAMPLES // BATCH))
    shown = str(stats)
    assert "the loader keeps up" in shown and "stage 0 (jit)" in shown and "ahead" in shown
    assert "operations: image: CropDecoder " in shown


def test_reset_and_the_difference_of_two_takes(dataset):
    fast = loader(dataset)
    list(fast)
    first = fast.stats(reset=True)
    assert fast.stats().batches == 0 and fast.stats().stages["stage 0 (jit)"] == 0.0
    list(fast)
    second = fast.stats()
    assert (first.epoch, second.epoch) == (0, 1) and second.batches == first.batches == SAMPLES // BATCH
    assert second.compiling == 0.0  # compiled in the first epoch, before the reset
    both = LoaderStats(1, 24, 192, 1.0, 2.0, dict.fromkeys(PHASES, 1.0), {"stage 0 (jit)": 3.0},
                       {"image: CropDecoder": 2.0}, 0.5, 2)
    one = LoaderStats(0, 12, 96, 0.25, 0.5, dict.fromkeys(PHASES, 0.5), {"stage 0 (jit)": 1.0},
                      {"image: CropDecoder": 0.5}, 0.5, 1)
    assert both - one == LoaderStats(1, 12, 96, 0.75, 1.5, dict.fromkeys(PHASES, 0.5), {"stage 0 (jit)": 2.0},
                                     {"image: CropDecoder": 1.5}, 0.0, 1)
    assert (both - one).waiting_share == 0.75 / 2.25 and (both - one).bottleneck


def test_each_epoch_is_logged_with_its_own_figures(dataset, caplog):
    logged = loader(dataset)
    with caplog.at_level(logging.INFO, logger="slipstream.loader"):
        list(logged)
        list(logged)
    lines = [r.getMessage() for r in caplog.records if r.name == "slipstream.loader"]
    assert len(lines) == 2
    assert all(f"{SAMPLES // BATCH} batches, {SAMPLES} samples" in line for line in lines)
    assert lines[0].startswith(f"{dataset}: epoch 0:") and lines[1].startswith(f"{dataset}: epoch 1:")


def test_each_wait_for_a_batch_shows_in_torch_profiler_traces(dataset):
    traced = loader(dataset)
    list(traced)  # compiled outside the trace
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        list(traced)
    names = [event.name for event in profile.events()]
    assert names.count("slipstream.next") == SAMPLES // BATCH + 1  # and the next() that ends the epoch


def test_the_readme_example_prints_its_figures(tmp_path, monkeypatch, capsys):
    from test_readme import python_block

    monkeypatch.chdir(tmp_path)
    exec(compile(python_block("## Is the loader the bottleneck?"), "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("epoch 1: 16 batches, 1024 samples, ") and "of its time" in printed[0]
    assert printed[1].startswith("loader thread: reading ") and printed[2].startswith("stages: stage 0 (jit) ")
