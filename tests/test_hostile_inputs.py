"""Every hostile input (tests/hostile_corpus.py) through each entry point:
the native kernels, the writer and the loader under each ``on_error`` policy.

A valid oddity must decode; anything else must raise the documented error
naming the sample, or be skipped or replaced and counted, never crash,
hang or hand over half-decoded pixels.
"""

from __future__ import annotations

import dataclasses
import time
import warnings

import numpy as np
import pytest
import torch

import hostile_corpus
import jpeg_corpus
import slipstream as ss
from slipstream import native
from slipstream.compiler import TorchOperation
from slipstream.fields.base import Encoded
from slipstream.fields.image import JPEG_MODE
from slipstream.ops import CenterCrop, RandomResizedCrop

CROP = 24


@dataclasses.dataclass(frozen=True)
class UncheckedImage(ss.RGBImageField):
    """An RGBImageField whose writer stores any bytes as a JPEG, unchecked, so
    that hostile bytes reach the loader (as from a file written elsewhere)."""

    def encode(self, value):
        try:
            info = native.jpeg_info(value)
            height, width = info.height, info.width
        except ss.DecodeError:
            height, width = 8, 8
        return Encoded({"height": height, "width": width, "mode": JPEG_MODE}, value)


@pytest.fixture(scope="module")
def corpus():
    return hostile_corpus.corpus()


@pytest.fixture(scope="module")
def hostile_file(tmp_path_factory, corpus):
    path = tmp_path_factory.mktemp("hostile") / "hostile.slip"
    rows = [(item.data, i) for i, item in enumerate(corpus)]
    ss.write(path, rows, {"image": UncheckedImage(), "label": ss.IntField()}, workers=0, verbose=False)
    return path


def failing(corpus) -> set[int]:
    return {i for i, item in enumerate(corpus) if not item.decodes}


def test_the_corpus_has_every_kind_the_issue_lists(corpus):
    names = " | ".join(item.name for item in corpus)
    for kind in ("cut at byte", "random bytes", "zero-length", "PNG", "GIF", "WebP", "CMYK", "YCCK", "12-bit",
                 "progressive", "arithmetic-coded", "restart marker", "1x1", "1x10000", "16000x16000", "EXIF",
                 "scan bomb"):
        assert kind in names, kind
    assert len(corpus) >= 100
    assert len(failing(corpus)) >= 90 and len(corpus) - len(failing(corpus)) >= 10


def test_every_input_through_the_kernels(corpus):
    refused = decoded = 0
    for item in corpus:
        if item.decodes:
            info = native.jpeg_info(item.data)
            assert (info.height, info.width) == (item.height, item.width), item.name
            assert native.jpeg_decode(item.data).shape == (item.height, item.width, 3), item.name
            out = native.jpeg_decode_crop_resize(item.data, 0, 0, item.height, item.width, CROP, CROP)
            assert out.shape == (CROP, CROP, 3) and out.any(), item.name
            decoded += 1
            continue
        try:
            info = native.jpeg_info(item.data)
            region = (0, 0, info.height, info.width)
        except ss.DecodeError:
            region = (0, 0, 1, 1)  # refused already by the header parser; the decoders must agree
        for call in (lambda: native.jpeg_decode(item.data),
                     lambda: native.jpeg_decode_crop_resize(item.data, *region, CROP, CROP)):
            with pytest.raises(ss.DecodeError) as err:
                call()
            assert err.value.status is not None and str(err.value), item.name
        refused += 1
    assert (decoded, refused) == (len(corpus) - len(failing(corpus)), len(failing(corpus)))


def refused_by_writer(corpus) -> set[int]:
    return {i for i in failing(corpus) if not corpus[i].foreign}


def test_the_writer_refuses_each_bad_input_naming_the_sample(tmp_path, corpus):
    good = corpus[0].data
    for i in sorted(refused_by_writer(corpus)):
        target = tmp_path / f"bad{i}.slip"
        with pytest.raises(ss.FieldValueError, match=r"item 1\b") as err:
            ss.write(target, [(good, 0), (corpus[i].data, 1)], {"image": ss.RGBImageField(), "label": ss.IntField()},
                     workers=0, verbose=False)
        assert "image" in str(err.value), corpus[i].name
        assert not target.exists() and not list(tmp_path.glob(".*.tmp")), corpus[i].name


def test_the_writer_skips_and_reports_bad_inputs(tmp_path, corpus):
    rows = [(item.data, i) for i, item in enumerate(corpus)]
    result = ss.write(tmp_path / "all.slip", rows, {"image": ss.RGBImageField(), "label": ss.IntField()},
                      workers=2, on_error="skip", verbose=False)
    assert {index for index, _ in result.skipped} == refused_by_writer(corpus)
    reader = ss.Reader(result.path)
    assert len(reader) == len(corpus) - len(refused_by_writer(corpus))
    for k in range(len(reader)):
        sample = reader[k]
        image, item = sample["image"], corpus[sample["label"]]
        assert item.decodes or item.foreign, item.name
        assert image.shape == (item.height, item.width, 3), item.name
        assert reader.value_bytes(k, "image")[:2] == b"\xff\xd8", item.name  # foreign formats stored as JPEG


def test_the_loader_raises_naming_each_bad_sample(hostile_file, corpus):
    for i in sorted(failing(corpus)):
        loader = ss.Loader(hostile_file, 1, {"image": [CenterCrop(CROP)]}, indices=[i], verbose=False)
        with pytest.raises(ss.DecodeError, match=rf"hostile.slip: sample {i} cannot be decoded") as err:
            list(loader)
        assert err.value.status is not None, corpus[i].name
        loader.close()


def test_the_loader_skips_bad_samples_and_counts_them(hostile_file, corpus):
    bad = failing(corpus)
    with ss.Loader(hostile_file, 16, {"image": [CenterCrop(CROP)]}, order=ss.Order("random", seed=3), on_error="skip",
                   verbose=False) as loader:
        for epoch in range(2):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                batches = list(loader)
            labels = np.concatenate([label.numpy() for _, label in batches])
            assert sorted(labels.tolist()) == sorted(set(range(len(corpus))) - bad)
            for image, label in batches:
                assert image.shape == (len(label), CROP, CROP, 3) and all(img.any() for img in image.numpy())
            [warning] = [w for w in caught if issubclass(w.category, ss.SampleWarning)]
            assert f"{len(bad)} samples of epoch {epoch} could not be decoded and were left out" in str(warning.message)
        assert set(loader.failures) == bad and loader.failure_count == 2 * len(bad)
        assert all(loader.failures.values())


def test_random_crops_of_truncated_files_fail_only_where_the_crop_needs_missing_data(hostile_file, corpus):
    """Rows below a crop are never read, so a crop above the cut of a
    truncated file decodes; every sample is either kept or counted."""
    bad = failing(corpus)
    with ss.Loader(hostile_file, 16, {"image": [RandomResizedCrop(CROP)]}, order=ss.Order("random", seed=3),
                   on_error="skip", verbose=False) as loader:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ss.SampleWarning)
            labels = np.concatenate([label.numpy() for _, label in loader])
        failed = set(loader.failures)
    assert failed <= bad and len(failed) >= len(bad) - 10
    assert sorted(labels.tolist() + sorted(failed)) == list(range(len(corpus)))
    assert all("cut at byte" in corpus[i].name for i in bad - failed)


def test_skipping_keeps_torch_stage_outputs_tensors(hostile_file, corpus):
    bad = failing(corpus)
    double = TorchOperation(Doubler())
    with ss.Loader(hostile_file, 16, {"image": [CenterCrop(CROP), double]}, order="sequential", on_error="skip",
                   verbose=False) as loader:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ss.SampleWarning)
            batches = [(image.clone(), label.clone()) for image, label in loader]
    for image, label in batches:
        assert isinstance(image, torch.Tensor) and image.shape == (len(label), CROP, CROP, 3)
    assert sum(len(label) for _, label in batches) == len(corpus) - len(bad)


class Doubler:
    """A torch stage: pixel values times two, as int16."""

    def __call__(self, batch):
        return batch.to(torch.int16) * 2


def test_the_loader_replaces_bad_samples_with_zeros(hostile_file, corpus):
    bad = failing(corpus)
    with ss.Loader(hostile_file, 32, {"image": [CenterCrop(CROP)]}, order="sequential", on_error="replace",
                   verbose=False) as loader:
        with pytest.warns(ss.SampleWarning, match=rf"{len(bad)} samples of epoch 0 .* replaced by zeros"):
            batches = list(loader)
        images = np.concatenate([image.numpy() for image, _ in batches])
        labels = np.concatenate([label.numpy() for _, label in batches])
    assert labels.tolist() == list(range(len(corpus)))
    for i, image in enumerate(images):
        assert (not image.any()) == (i in bad), corpus[i].name
    assert set(loader.failures) == bad and loader.failure_count == len(bad)


def test_a_batch_of_only_bad_samples_is_not_yielded_under_skip(hostile_file, corpus):
    bad = sorted(failing(corpus))[:4]
    good = [i for i in range(len(corpus)) if i not in failing(corpus)][:3]
    with ss.Loader(hostile_file, 4, {"image": [CenterCrop(CROP)]}, order="sequential", indices=bad + good,
                   on_error="skip", verbose=False) as loader:
        assert len(loader) == 2
        with pytest.warns(ss.SampleWarning):
            batches = list(loader)
        assert [label.tolist() for _, label in batches] == [good]
        assert loader.state_dict()["epoch"] == 1


def test_on_error_is_checked(hostile_file):
    with pytest.raises(ss.ArgumentError, match="on_error must be one of"):
        ss.Loader(hostile_file, 4, on_error="ignore")


# ---------------------------------------------------------------- hostile files


def test_a_scan_bomb_is_refused_by_the_writer_in_well_under_a_second(tmp_path, corpus):
    bomb = next(item.data for item in corpus if "scan bomb" in item.name)
    target = tmp_path / "bomb.slip"
    start = time.perf_counter()
    with pytest.raises(ss.FieldValueError, match=r"sample 1 \(item 1 of list\), field 'image': .*scans pass over "
                                                 r"its .* blocks more than 12 times, the limit SLIP_LIMIT_PASSES") as err:
        ss.write(target, [(corpus[0].data,), (bomb,)], {"image": ss.RGBImageField()}, workers=0, verbose=False)
    assert time.perf_counter() - start < 1.0
    assert "bomb.slip was not written" in str(err.value) and not target.exists()
    result = ss.write(target, [(corpus[0].data,), (bomb,)], {"image": ss.RGBImageField()}, workers=2,
                      on_error="skip", verbose=False)
    assert [index for index, _ in result.skipped] == [1] and "SLIP_LIMIT_PASSES" in result.skipped[0][1]
    assert len(ss.Reader(target)) == 1


FLIPPED = 9


@pytest.fixture(scope="module")
def flipped(tmp_path_factory):
    """24 small JPEGs in 4 KiB pages, a bit flipped inside the entropy data of
    sample FLIPPED where the JPEG still decodes, to other pixels: nothing but
    the page checksum can tell.  Returns the file, the samples sharing the
    damaged page, and an undamaged copy of the file."""
    images = [jpeg_corpus.make_sample(32, 40, seed=k).data for k in range(24)]
    folder = tmp_path_factory.mktemp("flipped")
    path, clean = folder / "flipped.slip", folder / "clean.slip"
    ss.write(clean, [(data, k) for k, data in enumerate(images)], {"image": ss.RGBImageField(),
                                                                   "label": ss.IntField()},
             page_size=4096, workers=0, verbose=False)
    path.write_bytes(clean.read_bytes())
    reader = ss.Reader(path)
    start = int(reader.metadata["image"]["offset"][FLIPPED])
    original = images[FLIPPED]
    for at in range(original.find(b"\xff\xda") + 20, len(original) - 8):
        damaged = bytearray(original)
        damaged[at] ^= 0x08
        try:
            pixels = native.jpeg_decode(bytes(damaged))
        except ss.DecodeError:
            continue
        if (pixels != native.jpeg_decode(original)).any():
            break
    file = bytearray(path.read_bytes())
    file[start + at] ^= 0x08
    path.write_bytes(bytes(file))
    pages = (reader.metadata["image"]["offset"].astype(np.int64) - reader.data_offset) // reader.page_size
    return path, set(np.flatnonzero(pages == pages[FLIPPED]).tolist()), clean


@pytest.mark.parametrize("os_cache", [True, False], ids=["mapped", "pread"])
def test_a_silently_wrong_jpeg_is_caught_by_its_page_checksum_on_first_load(flipped, os_cache):
    path, page_mates, _ = flipped
    first = min(page_mates)
    with ss.Loader(path, 4, {"image": [CenterCrop(CROP)]}, order="sequential", verbose=False,
                   memory=ss.Memory(os_cache=os_cache)) as loader:
        with pytest.raises(ss.DecodeError, match=rf"flipped.slip: sample {first} cannot be decoded \(field 'image': "
                                                 rf"data page \d+ \(bytes [\d,]+ to [\d,]+\) does not match its "
                                                 rf"checksum"):
            list(loader)


@pytest.mark.parametrize("os_cache", [True, False], ids=["mapped", "pread"])
def test_samples_in_a_corrupt_page_are_skipped_or_replaced(flipped, os_cache):
    path, page_mates, clean = flipped
    with ss.Loader(clean, 24, {"image": [CenterCrop(CROP)]}, order="sequential", verbose=False) as loader:
        expected = next(iter(loader))[0].clone()
    for policy in ("skip", "replace"):
        loader = ss.Loader(path, 5, {"image": [CenterCrop(CROP)]}, order="sequential", on_error=policy, verbose=False,
                           memory=ss.Memory(os_cache=os_cache))
        for epoch in range(2):  # the second epoch knows the page is bad without checking it again
            with pytest.warns(ss.SampleWarning, match=f"{len(page_mates)} samples of epoch {epoch}"):
                batches = [(images.clone(), labels.clone()) for images, labels in loader]
            images = torch.cat([b[0] for b in batches])
            labels = torch.cat([b[1] for b in batches]).tolist()
            if policy == "skip":
                assert labels == [k for k in range(24) if k not in page_mates]
            else:
                assert labels == list(range(24))
                for k in page_mates:
                    assert not images[k].any()
            for row, k in enumerate(labels):
                if k not in page_mates:
                    assert torch.equal(images[row], expected[k])
        assert set(loader.failures) == page_mates and loader.failure_count == 2 * len(page_mates)
        assert all("does not match its checksum" in reason for reason in loader.failures.values())
        assert loader.reader.pages_checked == loader.reader.page_count  # each page once, in the first epoch
        loader.close()


def test_later_epochs_check_no_page_again(tmp_path):
    images = [jpeg_corpus.make_sample(32, 40, seed=k).data for k in range(40)]
    path = tmp_path / "clean.slip"
    ss.write(path, [(data,) for data in images], {"image": ss.RGBImageField()}, page_size=4096, workers=0,
             verbose=False)
    for os_cache in (True, False):
        with ss.Loader(path, 8, {"image": [RandomResizedCrop(CROP)]}, verbose=False,
                       memory=ss.Memory(os_cache=os_cache)) as loader:
            assert loader.reader.pages_checked == 0
            list(loader)
            assert loader.reader.pages_checked == loader.reader.page_count > 1
            list(loader)
            list(loader)
            assert loader.reader.pages_checked == loader.reader.page_count


def test_json_nested_too_deeply_names_the_file_sample_and_field(tmp_path):
    path = tmp_path / "deep.slip"
    value = {"caption": "x" * 200_000}
    ss.write(path, [(1, value), (2, {"ok": True})], {"label": ss.IntField(), "meta": ss.JSONField()}, workers=0,
             page_checksums=False, verbose=False)
    reader = ss.Reader(path)
    start, size = int(reader.metadata["meta"]["offset"][0]), int(reader.metadata["meta"]["size"][0])
    data = bytearray(path.read_bytes())
    data[start:start + size] = (b"[" * (size // 2) + b"]" * (size - size // 2))  # 100,000 levels, same length
    path.write_bytes(bytes(data))
    reader = ss.Reader(path)
    expected = r"deep.slip: sample 0, field 'meta': its value is nested too deeply to read \(over Python's recursion"
    with pytest.raises(ss.FormatError, match=expected):
        reader[0]
    assert reader[1]["meta"] == {"ok": True}
    with ss.Loader(path, 2, order="sequential", verbose=False) as loader:
        with pytest.raises(ss.FormatError, match=expected):
            list(loader)
    with pytest.raises(ss.FieldValueError, match=r"sample 0 .*field 'meta': JSONField value is nested too deeply"):
        nested: list = []
        for _ in range(100_000):
            nested = [nested]
        ss.write(tmp_path / "deeper.slip", [(nested,)], {"meta": ss.JSONField()}, workers=0, verbose=False)


def test_a_stored_size_that_disagrees_with_the_jpeg_header_names_both(tmp_path):
    path = tmp_path / "sizes.slip"
    images = [jpeg_corpus.make_sample(48, 64, seed=k).data for k in range(4)]
    ss.write(path, [(data,) for data in images], {"image": ss.RGBImageField()}, workers=0, page_checksums=False,
             verbose=False)
    reader = ss.Reader(path)
    start = int(reader.metadata["image"]["offset"][2])
    data = bytearray(path.read_bytes())
    patched = jpeg_corpus.with_dimensions(images[2], 24, 64)  # the record still says 48x64
    data[start:start + len(patched)] = patched
    path.write_bytes(bytes(data))
    expected = r"the stored size 48x64 disagrees with the JPEG header's 24x64"
    with pytest.raises(ss.DecodeError, match=rf"sizes.slip: sample 2, field 'image': .*{expected}"):
        ss.Reader(path)[2]
    with ss.Loader(path, 4, {"image": [RandomResizedCrop(CROP, scale=(0.9, 1.0))]}, verbose=False) as loader:
        with pytest.raises(ss.DecodeError, match=rf"sizes.slip: sample 2 cannot be decoded \(field 'image': "
                                                 rf".*{expected}"):
            list(loader)
