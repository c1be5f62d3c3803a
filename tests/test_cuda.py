"""The loader's CUDA path: batches on the device bit-identical to the CPU
batches, pinned slots that are never rewritten while a copy out of them
waits, the training stream ordered after the copies, and the torch batch
augmentations on CUDA tensors agreeing with the CPU.

Every test here needs a CUDA device (the ``cuda`` marker skips them
elsewhere); ``make gpu-check`` runs them on a GPU machine.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from jpeg_corpus import make_sample, picture

import slipstream as ss
from slipstream.compiler import ArraySource, Pipeline
from slipstream.ops import ToDevice, ToTensor, presets
from slipstream.ops.batch import (BatchColorJitter, BatchGaussianBlur, BatchRandomErasing, BatchRandomGrayscale,
                                  BatchRandomSolarize)

pytestmark = pytest.mark.cuda

# Roughly 25 ms of GPU time at the clocks of current data-centre GPUs: long
# enough that a copy queued behind it is still waiting when the host moves on.
SLEEP_CYCLES = 50_000_000


@pytest.fixture(autouse=True)
def exact_float32():
    """Full float32 arithmetic on the GPU (no TF32 in convolutions), so that
    CPU and CUDA results can be compared closely."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """96 JPEGs of assorted sizes, 4:2:0 and 4:4:4, with labels; and the
    index of one that a test may corrupt."""
    samples = [make_sample(120 + 7 * (k % 9), 160 + 5 * (k % 11), subsampling=2 if k % 3 else 0, seed=k).data
               for k in range(96)]
    path = tmp_path_factory.mktemp("cuda") / "photos.slip"
    ss.write(path, [(data, k) for k, data in enumerate(samples)], {"image": ss.RGBImageField(),
                                                                    "label": ss.IntField()},
             workers=0, verbose=False, page_size=1 << 16)
    return path


def cpu_batches(path, batch_size, pipelines, epochs=2, **options):
    loader = ss.Loader(path, batch_size, pipelines, **options)
    return [[tensor.clone() for tensor in batch] for _ in range(epochs) for batch in loader]


PIPELINES = {"train": presets.imagenet_train(64), "val": presets.imagenet_val(64), "simclr": presets.simclr(64)}


@pytest.mark.parametrize("name", list(PIPELINES))
@pytest.mark.parametrize("batches_ahead", [1, 3])
def test_batches_on_the_device_are_bit_identical_to_the_cpu_batches(photos, name, batches_ahead):
    """Every batch is kept on the device, untouched, while later batches go
    through the same few host slots: none may show a later batch's bytes."""
    options = {"order": ss.Order("random", seed=4), "memory": ss.Memory(batches_ahead=batches_ahead)}
    expected = cpu_batches(photos, 16, PIPELINES[name], **options)
    loader = ss.Loader(photos, 16, PIPELINES[name], device="cuda", **options)
    received = [batch for _ in range(2) for batch in loader]
    torch.cuda.synchronize()
    assert len(received) == len(expected) == 12
    for got, want in zip(received, expected):
        assert len(got) == len(want)
        for tensor, reference in zip(got, want):
            assert tensor.is_cuda and tensor.dtype == reference.dtype and tensor.shape == reference.shape
            assert torch.equal(tensor.cpu(), reference)


def test_the_slots_are_pinned_host_memory(photos):
    loader = ss.Loader(photos, 16, presets.imagenet_train(64), device="cuda")
    buffers = loader.compiled.buffers
    assert buffers and all(torch.from_numpy(array).is_pinned() for array in buffers.values())


def test_the_training_stream_reads_each_batch_after_its_copy(photos):
    """A kernel queued on the training stream right after ``next()`` sees
    the whole batch: integer sums of the bit patterns, exact in any order,
    match the CPU's."""
    options = {"order": ss.Order("random", seed=6), "memory": ss.Memory(batches_ahead=1)}
    expected = [images.view(torch.int16).to(torch.int64).sum().item()
                for images, _ in cpu_batches(photos, 32, presets.imagenet_train(96), epochs=3, **options)]
    loader = ss.Loader(photos, 32, presets.imagenet_train(96), device="cuda", **options)
    sums = [images.view(torch.int16).to(torch.int64).sum() for _ in range(3) for images, _ in loader]
    assert [s.item() for s in sums] == expected


def test_a_busy_training_stream_does_not_let_a_slot_be_rewritten(photos):
    """The consumer's stream is kept busy far longer than a batch takes to
    make, so the host runs ahead: every batch taken must still match."""
    options = {"order": ss.Order("quasi_random", seed=8), "memory": ss.Memory(batches_ahead=1)}
    expected = cpu_batches(photos, 8, presets.imagenet_val(64), **options)
    loader = ss.Loader(photos, 8, presets.imagenet_val(64), device="cuda", **options)
    received = []
    for _ in range(2):
        for images, labels in loader:
            torch.cuda._sleep(SLEEP_CYCLES // 10)
            received.append((images * 1, labels))  # work on the training stream that reads the batch
    torch.cuda.synchronize()
    for (images, labels), (want_images, want_labels) in zip(received, expected, strict=True):
        assert torch.equal(labels.cpu(), want_labels) and torch.equal(images.cpu(), want_images)


def test_a_copy_queued_behind_other_work_keeps_its_slot():
    """``ToDevice`` queues its copy on the current stream; with that stream
    held up by a sleeping kernel, the compiled pipeline must wait for the
    copy before it writes the slot again (two calls later)."""
    data = np.stack([picture(32, 32, seed=k) for k in range(64)])
    compiled = Pipeline([ArraySource(data), ToDevice("cuda")]).compile(64, slots=2)
    stream = torch.cuda.Stream()
    received = []
    with torch.cuda.stream(stream):
        for step in range(6):
            torch.cuda._sleep(SLEEP_CYCLES)
            indices = np.roll(np.arange(64), 7 * step)
            received.append((indices, compiled(indices)))
    torch.cuda.synchronize()
    for indices, out in received:
        np.testing.assert_array_equal(out.cpu().numpy(), data[indices])


@pytest.mark.parametrize("where", ["loader", "pipeline"])
def test_skipped_samples_leave_the_same_rows_on_the_device(tmp_path, where):
    """A sample that fails under ``on_error="skip"`` leaves its batch before
    the loader's copy, or, after a ``ToDevice`` in the pipeline, from the
    batch already on the device."""
    samples = [make_sample(48, 64, seed=k).data for k in range(24)]
    path = tmp_path / "bad.slip"
    ss.write(path, [(s, k) for k, s in enumerate(samples)], {"image": ss.RGBImageField(), "label": ss.IntField()},
             workers=0, page_checksums=False, verbose=False)
    reader = ss.Reader(path)
    start, size = int(reader.metadata["image"]["offset"][5]), int(reader.metadata["image"]["size"][5])
    data = bytearray(path.read_bytes())
    data[start + size // 2: start + size // 2 + 2] = b"\xff\xd9"
    path.write_bytes(bytes(data))
    expected = cpu_batches(path, 8, {"image": [ToTensor()]}, epochs=1, order="sequential", on_error="skip")
    if where == "loader":
        loader = ss.Loader(path, 8, {"image": [ToTensor()]}, order="sequential", on_error="skip", device="cuda")
    else:
        loader = ss.Loader(path, 8, {"image": [ToTensor(), ToDevice("cuda")]}, order="sequential", on_error="skip")
    with pytest.warns(ss.SampleWarning, match="sample 5"):
        received = list(loader)
    assert [len(labels) for _, labels in received] == [7, 8, 8]
    for (images, labels), (want_images, want_labels) in zip(received, expected, strict=True):
        assert images.is_cuda and torch.equal(labels.cpu(), want_labels) and torch.equal(images.cpu(), want_images)
        assert labels.is_cuda == (where == "loader")


def test_two_loaders_on_the_device_from_two_threads(photos):
    options = {"order": ss.Order("random", seed=2)}
    expected = [labels.tolist() for _, labels in cpu_batches(photos, 12, presets.imagenet_train(64), **options)]
    results, errors = {}, []

    def run(name):
        try:
            loader = ss.Loader(photos, 12, presets.imagenet_train(64), device="cuda:0", **options)
            results[name] = [labels.tolist() for _ in range(2) for images, labels in loader
                             if images.device == torch.device("cuda:0")]
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors and results == {"a": expected, "b": expected}


BATCH_OPS = [lambda: BatchColorJitter(0.4, 0.4, 0.4, 0.1), lambda: BatchRandomGrayscale(0.5),
             lambda: BatchRandomSolarize(0.5, 0.5), lambda: BatchGaussianBlur(5), lambda: BatchRandomErasing(1.0)]


@pytest.mark.parametrize("make", BATCH_OPS)
def test_batch_augmentations_on_cuda_match_the_cpu(make):
    batch = torch.from_numpy(np.stack([picture(24, 28, seed=k) for k in range(16)])).permute(0, 3, 1, 2) / 255
    augmentation = make()
    params = augmentation.sample(batch, keys=np.arange(16, dtype=np.uint64) * 7919)
    on_cpu = augmentation.apply(batch, params)
    on_cuda = augmentation.apply(batch.cuda(), {k: v.cuda() for k, v in params.items()})
    assert on_cuda.is_cuda
    torch.testing.assert_close(on_cuda.cpu(), on_cpu, rtol=0, atol=1e-5)


def test_batch_augmentations_after_to_device_match_the_cpu_pipeline(photos):
    """The same keys draw the same parameters on either device."""
    def augmented(device):
        return [ToTensor(), *([ToDevice(device)] if device else []), BatchColorJitter(0.4, 0.4, 0.4, 0.1),
                BatchRandomErasing(0.5), BatchGaussianBlur(3, p=0.5), BatchRandomGrayscale(0.3)]

    options = {"order": ss.Order("random", seed=3)}
    crop = [ss.ops.RandomResizedCrop(48)]
    expected = cpu_batches(photos, 16, {"image": crop + augmented(None)}, epochs=1, **options)
    loader = ss.Loader(photos, 16, {"image": crop + augmented("cuda")}, **options)
    for (images, labels), (want_images, want_labels) in zip(loader, expected, strict=True):
        assert images.is_cuda
        torch.testing.assert_close(labels.cpu(), want_labels, rtol=0, atol=0)
        torch.testing.assert_close(images.cpu(), want_images, rtol=0, atol=1e-5)


def per_image_levels(got, want, std=presets.IMAGENET_STD):
    """Mean absolute difference of each image, in 0..255 levels, of two normalized batches."""
    scale = torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1) * 255
    return ((got.float().cpu() - want.float()) * scale).abs().mean(dim=(1, 2, 3))


@pytest.mark.parametrize("name", ["train", "val"])
def test_decoding_on_the_gpu_follows_the_cpu_pipeline(photos, name):
    """nvJPEG's batches: the same samples, crops and flips as the CPU
    pipeline's, the pixels within a few levels (another inverse DCT and
    chroma upsampling, a full-scale decode then an antialiased resize)."""
    make = {"train": presets.imagenet_train, "val": presets.imagenet_val}[name]
    options = {"order": ss.Order("random", seed=9)}
    expected = cpu_batches(photos, 16, make(64, dtype=torch.float32), epochs=1, **options)
    loader = ss.Loader(photos, 16, make(64, dtype=torch.float32, decode_device="cuda"), device="cuda", **options)
    levels = []
    for (images, labels), (want_images, want_labels) in zip(loader, expected, strict=True):
        assert images.is_cuda and images.dtype == torch.float32 and images.shape == want_images.shape
        assert torch.equal(labels.cpu(), want_labels)
        levels.append(per_image_levels(images, want_images))
    levels = torch.cat(levels)
    print(f"GPU decode vs CPU, {name}: mean {levels.mean():.2f} levels, worst image {levels.max():.2f}")
    # A crop or flip not the CPU's differs by 20 levels and more on these noisy pictures.
    assert levels.max() < 10.0 and levels.mean() < 5.0


def test_decoding_on_the_gpu_is_deterministic_and_resumes(photos):
    pipelines = presets.imagenet_train(64, decode_device="cuda")
    options = {"order": ss.Order("random", seed=11), "memory": ss.Memory(batches_ahead=2)}
    first = [images.clone() for _ in range(2) for images, _ in ss.Loader(photos, 16, pipelines, **options)]
    loader = ss.Loader(photos, 16, pipelines, **options)
    iterator = iter(loader)
    taken = [next(iterator)[0].clone() for _ in range(2)]
    state = loader.state_dict()
    resumed = ss.Loader(photos, 16, pipelines, **options)
    resumed.load_state_dict(state)
    rest = [images.clone() for images, _ in resumed]
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(taken + rest, first))
    assert len(taken + rest) == 6


def test_decoding_on_the_gpu_overlaps_a_busy_training_stream(photos):
    """The decode runs on the loader's stream: batches taken while the
    training stream sleeps are each whole and right."""
    pipelines = presets.imagenet_val(64, decode_device="cuda")
    options = {"order": ss.Order("sequential"), "memory": ss.Memory(batches_ahead=1)}
    expected = [images.clone() for images, _ in ss.Loader(photos, 8, pipelines, device="cuda", **options)]
    received = []
    for images, _ in ss.Loader(photos, 8, pipelines, device="cuda", **options):
        torch.cuda._sleep(SLEEP_CYCLES // 10)
        received.append(images * 1)
    torch.cuda.synchronize()
    assert len(received) == len(expected) == 12
    assert all(torch.equal(a, b) for a, b in zip(received, expected))
