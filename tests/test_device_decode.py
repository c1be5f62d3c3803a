"""``DecodeOnDevice``: what runs without a GPU.  Raw stored pixels need no
JPEG decoder, so the whole two-stage path (the compiled planner, then the
torch stage) runs here on the CPU device and is compared with the CPU
pipeline; the JPEG path on CUDA is in ``tests/test_cuda.py``."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch
from jpeg_corpus import make_sample, picture

import slipstream as ss
from slipstream.ops import CenterCrop, Normalize, RandomGrayscale, RandomHorizontalFlip, RandomResizedCrop
from slipstream.ops.device_decode import DecodeOnDevice

HAS_TORCHVISION = importlib.util.find_spec("torchvision") is not None


@pytest.fixture(scope="module")
def raw_images(tmp_path_factory):
    """48 raw-stored images of assorted sizes, with labels."""
    path = tmp_path_factory.mktemp("device") / "raw.slip"
    samples = [(picture(40 + 3 * (k % 7), 56 + 5 * (k % 5), seed=k), k) for k in range(48)]
    ss.write(path, samples, {"image": ss.RGBImageField(write_mode="raw"), "label": ss.IntField()},
             workers=0, verbose=False)
    return path


def batches(path, pipeline, **options):
    loader = ss.Loader(path, 16, {"image": pipeline}, order=ss.Order("random", seed=5), **options)
    return [[t.clone() for t in batch] for batch in loader]


def test_a_crop_of_the_whole_image_at_its_size_is_the_stored_pixels(tmp_path):
    """Resizing to the region's own size is the identity, so the device path
    and the CPU path give the same bytes, flipped or not."""
    path = tmp_path / "square.slip"
    images = [picture(32, 32, seed=k) for k in range(20)]
    ss.write(path, [(image, k) for k, image in enumerate(images)],
             {"image": ss.RGBImageField(write_mode="raw"), "label": ss.IntField()}, workers=0, verbose=False)
    for flip in ([], [RandomHorizontalFlip(1.0)]):
        cpu = batches(path, [CenterCrop(32, ratio=1.0), *flip])
        device = batches(path, [DecodeOnDevice("cpu"), CenterCrop(32, ratio=1.0), *flip])
        assert len(cpu) == len(device) == 2
        for (want, want_labels), (got, labels) in zip(cpu, device):
            assert got.dtype == torch.uint8 and got.shape == want.shape == (16 if len(labels) == 16 else 4, 32, 32, 3)
            assert torch.equal(labels, want_labels) and torch.equal(got, want)
        if flip:
            first = int(cpu[0][1][0])
            assert torch.equal(device[0][0][0], torch.from_numpy(images[first][:, ::-1].copy()))


def test_random_crops_flips_and_normalize_follow_the_cpu_pipeline(raw_images):
    """The same crops and flips as the CPU pipeline (the same draws), the
    pixels within interpolation's differences; the same batches again for
    the same seed, other ones in the next epoch."""
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    common = [RandomResizedCrop(24, scale=(0.5, 1.0)), RandomHorizontalFlip(), Normalize(mean, std, np.float32)]
    cpu = batches(raw_images, common)
    device = batches(raw_images, [DecodeOnDevice("cpu"), *common])
    again = batches(raw_images, [DecodeOnDevice("cpu"), *common])
    differences = []
    for (want, want_labels), (got, labels), (repeat, _) in zip(cpu, device, again, strict=True):
        assert got.shape == want.shape and got.dtype == torch.float32
        assert torch.equal(labels, want_labels) and torch.equal(got, repeat)
        differences.append((got - want).abs().mean(dim=(1, 2, 3)) * torch.tensor(std).mean() * 255)
    per_image = torch.cat(differences)
    # Bilinear kernels differ at the edges of a downscale; a different crop
    # or a missed flip would differ by tens of levels on these pictures.
    assert per_image.max() < 6.0, per_image
    loader = ss.Loader(raw_images, 16, {"image": [DecodeOnDevice("cpu"), *common]}, order=ss.Order("random", seed=5))
    first, second = [[images.clone() for images, _ in loader][0] for _epoch in range(2)]
    assert not torch.equal(first, second)


def test_the_folded_entries_are_the_devices_and_later_compiled_ones_stay_on_the_cpu(raw_images):
    """On the CPU device a compiled operation may follow (it reads host
    memory); the crop, flip and normalize are folded into the device stage."""
    loader = ss.Loader(raw_images, 8, {"image": [DecodeOnDevice("cpu"), RandomResizedCrop(24), RandomHorizontalFlip(),
                                                 RandomGrayscale(1.0)]})
    described = [node.describe() for node in loader.compiled.graph.nodes]
    assert [d.split("(")[0] for d in described if not d.startswith("ArraySource")] == [
        "DevicePlanner", "DeviceDecode", "RandomGrayscale"]
    assert "flip_p=0.5" in described[0]
    images, _ = next(iter(loader))
    assert torch.equal(images[..., 0], images[..., 1]) and torch.equal(images[..., 1], images[..., 2])


def test_a_crop_must_follow(raw_images):
    with pytest.raises(ss.ArgumentError, match="must be followed by a crop"):
        ss.Loader(raw_images, 8, {"image": [DecodeOnDevice("cpu"), Normalize()]})


def test_max_size_must_be_positive():
    with pytest.raises(ss.ArgumentError, match=r"^DecodeOnDevice: max_size must be None or an int in "
                                               r"\[1, 1073741824\], got 0$"):
        DecodeOnDevice("cpu", max_size=0)


def test_a_device_is_checked_when_made_and_this_machine_has_it_when_the_loader_is_built(raw_images):
    """The form of the device when the entry is made (its default, "cuda",
    makes an entry on any machine); whether this machine has it when the
    loader binds the entry, before the first batch."""
    with pytest.raises(ss.ArgumentError, match=r"^DecodeOnDevice: device must be a torch device .*, got 'gpu0'$"):
        DecodeOnDevice("gpu0")
    wanted = f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"
    entry = DecodeOnDevice(wanted)
    with pytest.raises(ss.ArgumentError, match=rf"^DecodeOnDevice: device '{wanted}' was asked for, but torch finds"):
        ss.Loader(raw_images, 8, {"image": [entry, CenterCrop(24)]}, verbose=False)


def test_a_sample_over_max_size_is_a_decode_error_naming_it(raw_images):
    """Every image here is larger than 1,000 bytes of raw pixels."""
    loader = ss.Loader(raw_images, 8, {"image": [DecodeOnDevice("cpu", max_size=1000), CenterCrop(24)]},
                       order="sequential")
    with pytest.raises(ss.DecodeError, match="sample 0 cannot be decoded"):
        next(iter(loader))
    skipping = ss.Loader(raw_images, 8, {"image": [DecodeOnDevice("cpu", max_size=1000), CenterCrop(24)]},
                         order="sequential", on_error="skip")
    with pytest.warns(ss.SampleWarning):
        assert list(skipping) == []


@pytest.mark.skipif(HAS_TORCHVISION, reason="torchvision is installed here")
def test_jpegs_without_torchvision_say_what_is_missing(tmp_path):
    path = tmp_path / "jpeg.slip"
    ss.write(path, [(make_sample(32, 40, seed=k).data, k) for k in range(4)],
             {"image": ss.RGBImageField(), "label": ss.IntField()}, workers=0, verbose=False)
    with pytest.raises(ss.ArgumentError, match=r"jpeg.slip, field 'image': .*torchvision is not installed"):
        ss.Loader(path, 4, {"image": [DecodeOnDevice("cpu"), CenterCrop(24)]})


def test_a_resize_of_the_shorter_side_alone_is_refused_as_on_the_cpu(raw_images):
    from slipstream.ops import Resize

    with pytest.raises(ValueError, match="CenterCrop"):
        ss.Loader(raw_images, 8, {"image": [Resize(32)]})
    with pytest.raises(ValueError, match="CenterCrop"):
        ss.Loader(raw_images, 8, {"image": [DecodeOnDevice("cpu"), Resize(32)]})
