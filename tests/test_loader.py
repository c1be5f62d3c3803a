"""The loader on generated datasets: orders, subsets, drop_last,
determinism, epochs, resume, decoders, errors, memory managers, threads.

The tests that take the ``device`` fixture ask for their batches there:
the CPU, or the device ``$SLIPSTREAM_TEST_DEVICE`` names (``make
gpu-check`` runs them with ``cuda``)."""

from __future__ import annotations

import gc
import os
import resource
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch
from jpeg_corpus import make_sample
from test_compiler import Invert

import slipstream as ss
from slipstream.compiler import Operation
from slipstream.compiler import random as rnd

ORDERS = ["sequential", "random", "quasi_random"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """203 samples: a raw 12x10 image, a label, a float, an array, bytes and JSON;
    4 KiB pages so that the samples spread over many pages."""
    n = 203
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, 12, 10, 3), dtype=np.uint8)
    items = [{"image": images[i], "label": i, "score": i / 8, "vec": np.arange(5, dtype=np.float32) * i,
              "blob": bytes([i % 256]) * (i % 7), "meta": {"i": i, "name": f"s{i}"}} for i in range(n)]
    fields = {"image": ss.RGBImageField(write_mode="raw"), "label": ss.IntField(), "score": ss.FloatField(),
              "vec": ss.NDArrayField(np.float32, (5,)), "blob": ss.BytesField(), "meta": ss.JSONField()}
    path = tmp_path_factory.mktemp("loader") / "data.slip"
    ss.write(path, [tuple(item.values()) for item in items], fields, workers=0, page_size=4096, verbose=False)
    return path, images


def labels_of(loader) -> list[list[int]]:
    return [batch[1].tolist() for batch in loader]


def host(tensor: torch.Tensor) -> np.ndarray:
    """A batch's values as a NumPy array, wherever the batch is."""
    return tensor.cpu().numpy()


# ---------------------------------------------------------------- decoding


def test_every_field_decodes_with_its_default_decoder(dataset, device):
    path, images = dataset
    loader = ss.Loader(path, 16, order="sequential", as_dict=True, device=device)
    assert loader.output_names == ["image", "label", "score", "vec", "blob", "meta"] and len(loader) == 13
    count = 0
    for batch in loader:
        labels = host(batch["label"])
        assert batch["image"].dtype == torch.uint8 and batch["image"].shape[1:] == (12, 10, 3)
        assert batch["image"].device.type == device.type
        np.testing.assert_array_equal(host(batch["image"]), images[labels])
        np.testing.assert_array_equal(host(batch["score"]), labels / 8)
        np.testing.assert_array_equal(host(batch["vec"]), np.arange(5, dtype=np.float32) * labels[:, None])
        assert batch["blob"] == [bytes([i % 256]) * (i % 7) for i in labels]
        assert batch["meta"] == [{"i": int(i), "name": f"s{i}"} for i in labels]
        count += len(labels)
    assert count == 203


def test_pipelines_drop_fields_and_add_operations(dataset, device):
    path, images = dataset

    loader = ss.Loader(path, 50, {"image": [Invert()], "score": None, "vec": None, "blob": None, "meta": None},
                       order="sequential", device=device)
    assert loader.output_names == ["image", "label"]
    image, label = next(iter(loader))
    np.testing.assert_array_equal(host(image), 255 - images[:50])


def dataclasses_frozen(cls):
    import dataclasses

    return dataclasses.dataclass(frozen=True)(cls)


def test_jpeg_images_of_one_size_and_mixed_sizes(tmp_path, device):
    samples = [make_sample(24, 32, seed=k) for k in range(10)]
    path = tmp_path / "jpeg.slip"
    ss.write(path, [(s.data, k) for k, s in enumerate(samples)], {"image": ss.RGBImageField(),
                                                                   "label": ss.IntField()}, workers=0)
    images, labels = next(iter(ss.Loader(path, 10, order="sequential", device=device)))
    for k in range(10):
        np.testing.assert_array_equal(host(images[k]), ss.native.jpeg_decode(samples[k].data))
    mixed = tmp_path / "mixed.slip"
    ss.write(mixed, [(make_sample(20 + k, 30).data,) for k in range(3)], {"image": ss.RGBImageField()}, workers=0)
    with pytest.raises(ss.ArgumentError, match=r"3 different sizes .* starts with a crop \(RandomResizedCrop"):
        ss.Loader(mixed, 2)


def test_a_corrupt_image_is_reported_with_its_sample_index(tmp_path, device):
    samples = [make_sample(64, 64, seed=k) for k in range(12)]
    path = tmp_path / "bad.slip"
    ss.write(path, [(s.data,) for s in samples], {"image": ss.RGBImageField()}, workers=0, page_checksums=False)
    reader = ss.Reader(path)
    start, size = int(reader.metadata["image"]["offset"][7]), int(reader.metadata["image"]["size"][7])
    data = bytearray(path.read_bytes())
    data[start + size // 2: start + size // 2 + 2] = b"\xff\xd9"  # an end-of-image marker mid-way
    path.write_bytes(bytes(data))  # pages carry no checksums here: the loader itself must notice
    loader = ss.Loader(path, 4, order="sequential", device=device)
    with pytest.raises(ss.DecodeError, match=r"bad.slip: sample 7 cannot be decoded"):
        for _ in loader:
            pass


def test_an_exception_in_a_torch_stage_names_the_batch_samples(dataset, device):
    path, _ = dataset

    class Fails(torch.nn.Module):
        def forward(self, x):
            if x.shape[0] > 1:
                raise RuntimeError("boom")
            return x

    loader = ss.Loader(path, 8, {"label": [Fails()], "image": None, "score": None, "vec": None, "blob": None,
                                 "meta": None}, order="sequential", device=device)
    with pytest.raises(ss.PipelineError, match=r"batch 0 of epoch 0 \(samples 0, 1, 2, 3, 4, 5, 6, 7\) failed: "
                                               r"RuntimeError: boom"):
        next(iter(loader))


# ---------------------------------------------------------------- orders


@pytest.mark.parametrize("order", ORDERS)
def test_each_index_once_per_epoch_and_epochs_differ(dataset, order, device):
    path, _ = dataset
    loader = ss.Loader(path, 16, order=ss.Order(order, seed=3), device=device)
    first, second = labels_of(loader), labels_of(loader)
    for epoch in (first, second):
        flat = [i for batch in epoch for i in batch]
        assert sorted(flat) == list(range(203)) and len(epoch) == len(loader) == 13
    if order == "sequential":
        assert first == second and first[0] == list(range(16))
    else:
        assert first != second
    loader.set_epoch(0)
    assert labels_of(loader) == first  # epochs are a function of (seed, epoch)


def test_set_epoch_takes_the_epochs_a_state_can_hold(dataset):
    """An epoch is an integer in [0, 2**63 - 1]: what state_dict() records
    and load_state_dict() takes back."""
    path, _ = dataset
    loader = ss.Loader(path, 16, {"image": None}, order=ss.Order("random", seed=3))
    for epoch, message in [(-1, "epoch must be a non-negative integer, got -1"),
                           (2.7, "epoch must be a non-negative integer, got 2.7"),
                           (True, "epoch must be a non-negative integer, got True"),
                           (2**63, f"epoch must be at most {2**63 - 1}, got {2**63}")]:
        with pytest.raises(ss.ArgumentError, match=message):
            loader.set_epoch(epoch)
        assert loader.epoch == 0
    loader.set_epoch(np.int64(2**63 - 1))
    assert type(loader.epoch) is int
    iterator = iter(loader)
    first = next(iterator)[0].tolist()
    resumed = ss.Loader(path, 16, {"image": None}, order=ss.Order("random", seed=3))
    resumed.load_state_dict(loader.state_dict())
    iterator.close()
    loader.set_epoch(2**63 - 1)
    assert [b[0].tolist() for b in resumed] == [b[0].tolist() for b in loader][1:] and first


@pytest.mark.parametrize("order", ["random", "quasi_random"])
def test_seeds_are_64_bit_integers_as_torch_takes_them(dataset, order):
    """Seeds in [-2**63, 2**64 - 1] (torch.manual_seed's range; a negative
    seed is its two's complement, as the random operations take it): other
    seeds give other orders, and a seed beyond the range is refused rather
    than wrapped onto another."""
    path, _ = dataset
    def samples(seed):
        return ss.Loader(path, 16, {"image": None}, order=ss.Order(order, seed=seed)).epoch_samples(0).tolist()

    assert samples(-1) == samples(2**64 - 1)
    assert samples(-1) != samples(2**63 - 1) and samples(0) != samples(2**63) and samples(-2**63) != samples(0)
    for seed in (2**64, -2**63 - 1):
        with pytest.raises(ss.ArgumentError, match=rf"seed must be an integer in \[{-2**63}, {2**64 - 1}\], "
                                                   rf"got {seed}"):
            ss.Order(order, seed=seed)


@pytest.mark.parametrize("order", ORDERS)
def test_subsets_and_drop_last(dataset, order, device):
    path, _ = dataset
    subset = np.arange(0, 203, 3)  # 68 samples
    kept = ss.Loader(path, 10, order=order, indices=subset, device=device)
    batches = labels_of(kept)
    assert len(kept) == 7 and [len(b) for b in batches] == [10] * 6 + [8]
    assert sorted(i for b in batches for i in b) == subset.tolist()
    dropped = ss.Loader(path, 10, order=order, indices=subset, device=device, sharding=ss.Sharding(drop_last=True))
    batches = labels_of(dropped)
    assert len(dropped) == 6 and [len(b) for b in batches] == [10] * 6
    assert set(i for b in batches for i in b) <= set(subset.tolist())


def test_indices_that_are_not_integers_are_refused(dataset):
    path, _ = dataset
    labels = np.arange(203)
    for indices, kind in [(labels % 2 == 0, "bool"), ([1.5, 2.5], "float64"), (["3", "4"], "<U1"),
                          ([2**70], "object")]:
        with pytest.raises(ss.ArgumentError, match=rf"indices must be integer dataset indices.*{kind}"):
            ss.Loader(path, 10, indices=indices)
    for indices in ([], np.array([4, 2], np.uint8), torch.tensor([5, 1]), [[1, 2], [3, 4]]):
        assert ss.Loader(path, 10, indices=indices).indices.tolist() == np.asarray(indices).reshape(-1).tolist()


def test_quasi_random_keeps_consecutive_samples_within_a_window_of_pages(dataset):
    path, _ = dataset
    loader = ss.Loader(path, 16, order=ss.Order("quasi_random", window_pages=2))
    reader = loader.reader
    page = (reader.metadata["image"]["offset"].astype(np.int64) - reader.data_offset) // reader.page_size
    order = loader.epoch_samples(0)
    assert reader.page_count >= 20
    for start in range(0, len(order) - 16, 16):
        assert len(set(page[order[start:start + 16]].tolist())) <= 4  # two windows of two pages at most


@pytest.mark.parametrize("threads", [1, 2])
def test_same_batches_for_any_thread_count_and_run(dataset, threads, device):
    path, _ = dataset
    reference = [b[0].numpy().copy() for b in ss.Loader(path, 32, order=ss.Order("random", seed=5))]
    loader = ss.Loader(path, 32, order=ss.Order("random", seed=5), num_threads=threads, device=device)
    for expected, batch in zip(reference, loader):
        np.testing.assert_array_equal(host(batch[0]), expected)


# ---------------------------------------------------------------- resume


@dataclasses_frozen
class RandomShift(Operation):
    """A random per-sample augmentation: the resumed batches must repeat it."""

    def declare(self, state):
        return state, None

    def generate_code(self):
        integers = rnd.integers

        def shift(x, key):
            delta = np.uint8(integers(key, 0, 0, 256))
            flat = x.reshape(-1)
            for j in range(flat.size):
                flat[j] = np.uint8(flat[j] + delta)
            return x

        return shift


@pytest.mark.parametrize("order", ORDERS)
def test_resume_mid_epoch_repeats_the_following_batches_exactly(dataset, order, device):
    path, _ = dataset
    pipelines = {"image": [RandomShift()], "blob": None, "meta": None}
    loader = ss.Loader(path, 16, pipelines, order=ss.Order(order, seed=11), device=device)
    labels_of(loader)  # epoch 0
    iterator = iter(loader)  # epoch 1
    for _ in range(5):
        next(iterator)
    state = loader.state_dict()
    assert state["epoch"] == 1 and state["batch"] == 5
    rest = [(host(b[0]).copy(), host(b[1]).copy()) for b in iterator]
    fresh = ss.Loader(path, 16, pipelines, order=ss.Order(order, seed=11), device=device)
    fresh.load_state_dict(state)
    resumed = [(host(b[0]).copy(), host(b[1]).copy()) for b in fresh]
    assert len(resumed) == len(rest) == 8
    for (a_img, a_lab), (b_img, b_lab) in zip(rest, resumed):
        np.testing.assert_array_equal(a_lab, b_lab)
        np.testing.assert_array_equal(a_img, b_img)
    assert fresh.state_dict()["epoch"] == 2
    with pytest.raises(ss.ArgumentError, match="cannot resume: the state has seed=11, this loader 12"):
        ss.Loader(path, 16, pipelines, order=ss.Order(order, seed=12)).load_state_dict(state)


# ---------------------------------------------------------------- memory managers


def test_page_pool_stays_within_its_bound(tmp_path, device):
    images = np.random.default_rng(1).integers(0, 256, (1500, 12, 10, 3), dtype=np.uint8)
    path = tmp_path / "many.slip"
    ss.write(path, {"image": images, "label": np.arange(1500)}, {"image": ss.RGBImageField(write_mode="raw"),
                                                                 "label": ss.IntField()}, workers=0, page_size=4096)
    reader = ss.Reader(path)
    pool = 4
    assert reader.page_count >= 20 * pool
    loader = ss.Loader(path, 8, order=ss.Order("quasi_random", window_pages=1), device=device,
                       memory=ss.Memory(os_cache=False, pool_pages=pool))
    for epoch in range(2):
        seen = []
        for image, label in loader:
            np.testing.assert_array_equal(host(image), images[host(label)])
            seen += label.tolist()
        assert sorted(seen) == list(range(1500))
    store = loader.memory.store
    assert store.peak_in_use <= pool and store.capacity == pool
    assert store.pages_read >= 2 * reader.page_count  # every page, each epoch, through 4 pages at once
    with pytest.raises(ss.ArgumentError, match="needs .* pages but the page pool holds 1"):
        iter(ss.Loader(path, 64, order="random", memory=ss.Memory(os_cache=False, pool_pages=1)))


def test_both_memory_managers_give_the_same_batches(dataset, device):
    path, _ = dataset
    mapped = [host(b[0]).copy() for b in ss.Loader(path, 20, order=ss.Order("random", seed=2), device=device)]
    pooled = [host(b[0]).copy() for b in ss.Loader(path, 20, order=ss.Order("random", seed=2), device=device,
                                                   memory=ss.Memory(os_cache=False, pool_pages=16))]
    assert len(mapped) == len(pooled)
    for a, b in zip(mapped, pooled):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- threads and clean-up


def test_two_loaders_alternately_and_from_two_threads(dataset, device):
    path, _ = dataset
    train = ss.Loader(path, 16, order=ss.Order("random", seed=1), device=device)
    val = ss.Loader(path, 16, order="sequential", device=device)
    expected_val = labels_of(val)
    for batch in train:  # a validation pass inside the training loop
        assert labels_of(val) == expected_val
        break
    results, errors = {}, []

    def run(name, loader):
        try:
            results[name] = [labels_of(loader) for _ in range(3)]
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n, l)) for n, l in (("train", train), ("val", val))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and results["val"] == [expected_val] * 3
    assert all(sorted(i for b in epoch for i in b) == list(range(203)) for epoch in results["train"])


def rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_no_thread_or_memory_leaks(dataset, device):
    path, _ = dataset
    loader = ss.Loader(path, 8, order="random", device=device)
    next(iter(loader))
    gc.collect()
    threads, rss = threading.active_count(), rss_mb()
    for _ in range(200):  # start an epoch, take a batch, leave
        for batch in loader:
            break
    gc.collect()
    assert threading.active_count() == threads
    for _ in range(20):
        other = ss.Loader(path, 8, order="random", device=device)
        next(iter(other))
        del other
    gc.collect()
    assert threading.active_count() == threads
    assert rss_mb() - rss < 200


def test_stored_bytes_hands_over_undecoded_values(tmp_path, device):
    samples = [make_sample(16 + k, 20, seed=k).data for k in range(6)]
    path = tmp_path / "raw.slip"
    ss.write(path, [(s,) for s in samples], {"image": ss.RGBImageField(tile_width=None)}, workers=0)
    longest = max(map(len, samples))
    (batch,) = next(iter(ss.Loader(path, 6, {"image": [ss.ops.StoredBytes(longest)]}, order="sequential",
                                   device=device)))
    assert batch.shape == (6, longest) and batch.dtype == torch.uint8
    for k, data in enumerate(samples):
        assert host(batch[k, :len(data)]).tobytes() == data
    with pytest.raises(ss.DecodeError, match="sample 0 cannot be decoded"):
        next(iter(ss.Loader(path, 6, {"image": [ss.ops.StoredBytes(100)]}, order="sequential")))


STOPPING = """
import sys, time, numpy as np, slipstream as ss
loader = ss.Loader(sys.argv[1], 4, order="random", device=sys.argv[3])
batches = iter(loader)
next(batches)
print("running", flush=True)
if sys.argv[2] == "exit":
    sys.exit(0)  # mid-epoch, the loader thread still working
for epoch in range(10**6):
    for batch in loader:
        time.sleep(0.001)
"""


@pytest.mark.parametrize("how", ["exit", "sigint"])
def test_interpreter_exit_and_ctrl_c_stop_promptly(dataset, tmp_path, how, device):
    path, _ = dataset
    proc = subprocess.Popen([sys.executable, "-c", STOPPING, str(path), how, str(device)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    assert proc.stdout.readline().strip() == "running"
    if how == "sigint":
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
    start = time.monotonic()
    _, err = proc.communicate(timeout=60)
    assert time.monotonic() - start < 10
    if how == "exit":
        assert proc.returncode == 0, err
    else:
        assert proc.returncode != 0 and "KeyboardInterrupt" in err


def test_a_source_is_converted_once_and_loaded(tmp_path, monkeypatch):
    monkeypatch.setenv("SLIPSTREAM_CACHE_DIR", str(tmp_path / "cache"))
    for label, name in enumerate(["a", "b"]):
        (tmp_path / "tree" / name).mkdir(parents=True)
        for k in range(5):
            (tmp_path / "tree" / name / f"{k}.jpg").write_bytes(make_sample(16, 16, seed=k + 5 * label).data)
    loader = ss.Loader(tmp_path / "tree", 4, order="sequential")
    labels = [b[1].tolist() for b in loader]
    assert labels == [[0, 0, 0, 0], [0, 1, 1, 1], [1, 1]]
    assert len(list((tmp_path / "cache" / "datasets").glob("*.slip"))) == 1
    assert ss.Loader(tmp_path / "tree", 4).reader.path == loader.reader.path


@pytest.mark.cuda
def test_batches_on_the_device_match_and_slots_are_not_overwritten_early(dataset):
    path, images = dataset
    loader = ss.Loader(path, 8, {"blob": None, "meta": None}, order=ss.Order("random", seed=9), device="cuda",
                       memory=ss.Memory(batches_ahead=1))
    received = []
    for image, label, *_ in loader:  # kept on the device while later batches reuse the host slots
        assert image.is_cuda and label.is_cuda
        received.append((image, label))
    torch.cuda.synchronize()
    for image, label in received:
        np.testing.assert_array_equal(host(image), images[host(label)])
