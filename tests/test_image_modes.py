"""What ``RGBImageField`` makes of images that are not plain 8-bit RGB:
every Pillow mode read from real PNG and TIFF files (16-bit grey scaled to
8 bits, not clipped to white; floating point refused by name), sizes no
reader would read back (refused when written, in every write mode), and
the colour ``write_mode="yuv420"`` loses, which the writer counts once."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import real_photos
from PIL import Image

import slipstream as ss
from slipstream import native
from slipstream.errors import FieldValueError, LossWarning
from slipstream.fields.image_modes import RAW_MODE, YUV420_MODE


def write(path: Path, images: list, mode: str = "raw", **options) -> ss.Reader:
    """``images`` written with ``write_mode=mode`` in this process, opened again."""
    ss.write(path, [{"image": image} for image in images], {"image": ss.RGBImageField(write_mode=mode, **options)},
             workers=0, verbose=False)
    return ss.Reader(path)


# ---------------------------------------------------------------- sizes no reader reads back


@pytest.mark.parametrize("mode", ["raw", "smart", "jpeg", "yuv420"])
def test_every_write_mode_refuses_a_size_the_reader_refuses_naming_the_sample(tmp_path, mode):
    target = tmp_path / f"{mode}.slip"
    wide = np.zeros((1, 65535, 3), np.uint8)
    field = ss.RGBImageField(write_mode=mode, smart_threshold=1 << 20)  # "smart" stores it raw
    with pytest.raises(FieldValueError, match=r"sample 1 \(.*field 'image': a 1x65535 image is outside the sizes a "
                                              r"dataset file holds \(1 to 65500 pixels a side"):
        ss.write(target, [{"image": np.zeros((4, 4, 3), np.uint8)}, {"image": wide}], {"image": field}, workers=0,
                 verbose=False)
    assert not target.exists()


def test_the_widest_raw_image_a_file_holds_is_written_and_read_back(tmp_path):
    widest = np.arange(65500 * 3, dtype=np.uint32).astype(np.uint8).reshape(1, 65500, 3)
    reader = write(tmp_path / "widest.slip", [widest])
    assert reader.metadata["image"]["mode"].tolist() == [RAW_MODE]
    np.testing.assert_array_equal(reader[0]["image"], widest)


# ---------------------------------------------------------------- Pillow's modes, from real files


@pytest.fixture(scope="module")
def photo() -> tuple[np.ndarray, np.ndarray]:
    """A real colour photo and a real grey one, 8 bits, 96 x 128."""
    return real_photos.pixels("astronaut", (128, 96)), real_photos.pixels("camera", (128, 96), "L")


def sixteen_bit(grey: np.ndarray) -> np.ndarray:
    """``grey`` at 16 bits with detail in the low byte: each value v becomes
    257 v plus up to 128 either way, which scaling to 8 bits rounds back to v."""
    noise = np.random.default_rng(0).integers(-128, 129, grey.shape)
    return np.clip(grey.astype(np.int64) * 257 + noise, 0, 65535)


def pillow_file(folder: Path, mode: str, suffix: str, photo: tuple[np.ndarray, np.ndarray]) -> tuple[Path, np.ndarray]:
    """A file Pillow writes of an image of ``mode``, and the RGB pixels it must be stored as."""
    colour, grey = photo
    rgb = Image.fromarray(colour)
    if mode in ("I;16", "I"):
        values = sixteen_bit(grey)
        image = Image.fromarray(values.astype(np.uint16 if mode == "I;16" else np.int32))
        want = np.repeat(grey[:, :, None], 3, axis=2)
    elif mode == "F":
        image = Image.fromarray(grey.astype(np.float32) / 255)
        want = None
    elif mode in ("1", "L", "LA"):
        image = Image.fromarray(grey).convert(mode)
        want = np.asarray(image.convert("RGB"))
    else:  # P, RGBA, CMYK: Pillow's own conversion to RGB
        image = rgb.convert(mode)
        want = np.asarray(image.convert("RGB"))
    assert image.mode == mode
    path = folder / f"{mode.replace(';', '-')}{suffix}"
    image.save(path)
    with Image.open(path) as again:
        assert again.mode == mode, (again.mode, mode)  # the file holds the mode, not a conversion of it
    return path, want


MODES = [("1", ".png"), ("L", ".png"), ("LA", ".png"), ("P", ".png"), ("RGBA", ".png"), ("CMYK", ".tif"),
         ("I;16", ".png"), ("I;16", ".tif"), ("I", ".tif"), ("L", ".tif"), ("RGBA", ".tif")]


@pytest.mark.parametrize(("mode", "suffix"), MODES, ids=[f"{m}{s}" for m, s in MODES])
def test_every_pillow_mode_is_stored_as_its_rgb_pixels(tmp_path, photo, mode, suffix):
    path, want = pillow_file(tmp_path, mode, suffix, photo)
    stored = write(tmp_path / "out.slip", [str(path)])[0]["image"]
    np.testing.assert_array_equal(stored, want)
    if mode in ("I;16", "I"):
        assert (stored == 255).mean() < 0.05  # Pillow's convert("RGB") clips: 100% white


def test_a_16_bit_pillow_image_given_as_an_object_is_scaled_too(tmp_path, photo):
    grey = photo[1]
    image = Image.fromarray(sixteen_bit(grey).astype(np.uint16))
    stored = write(tmp_path / "object.slip", [image])[0]["image"]
    np.testing.assert_array_equal(stored[:, :, 1], grey)


def test_the_full_16_bit_range_maps_onto_the_full_8_bit_range(tmp_path):
    values = np.array([[0, 128, 129, 257, 32767, 65406, 65407, 65535]], np.uint16)
    path = tmp_path / "ramp.png"
    Image.fromarray(values).save(path)
    stored = write(tmp_path / "ramp.slip", [str(path)])[0]["image"][0, :, 0]
    assert stored.tolist() == [0, 0, 1, 1, 127, 254, 255, 255]  # value / 257, rounded


@pytest.mark.parametrize(("make", "says"), [
    (lambda grey: Image.fromarray(grey.astype(np.float32) / 255),
     r"floating-point image \(Pillow mode 'F', values from 0 to 1\)"),
    (lambda grey: Image.fromarray(grey.astype(np.int32) * 1000),
     r"32-bit integer image \(Pillow mode 'I'\) with values from \d+ to \d+: only values from 0 to 65535"),
], ids=["F", "I-beyond-16-bit"])
def test_images_without_a_range_to_scale_from_are_refused_naming_the_file(tmp_path, photo, make, says):
    path = tmp_path / "values.tif"
    make(photo[1]).save(path)
    target = tmp_path / "refused.slip"
    with pytest.raises(FieldValueError, match=rf"sample 0 \(.*field 'image': .*{says}.*give a uint8 array"):
        write(target, [str(path)])
    assert not target.exists()


# ---------------------------------------------------------------- what yuv420 loses


@pytest.fixture(scope="module")
def mixed() -> list:
    """Two 4:2:0 photos, two 4:4:4 ones, a grey JPEG, a grey PNG array and a colour array."""
    colour, grey = real_photos.pixels("coffee", (96, 64)), real_photos.pixels("camera", (96, 64), "L")
    return (real_photos.jpegs(2, "4:2:0") + real_photos.jpegs(2, "4:4:4", start=2) + real_photos.jpegs(1, "grey")
            + [grey, colour])


def lossy_warnings(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, LossWarning)]


def test_yuv420_counts_the_images_stored_lossily_once(tmp_path, mixed):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        reader = write(tmp_path / "mixed.slip", mixed, "yuv420")
    told = lossy_warnings(record)
    assert len(told) == 1, told
    assert "field 'image': 3 of 7 samples (samples 2, 3, 6) were stored as YCbCr 4:2:0 planes with their colour" \
           in told[0]
    assert str(tmp_path / "mixed.slip") in told[0] and "write_mode='jpeg'" in told[0]
    assert (reader.metadata["image"]["mode"] == YUV420_MODE).all()
    # What the count says: the 4:4:4 photos lose colour detail (16 and 103 levels at most), the 4:2:0 ones and
    # the grey one do not (a level of rounding at most).
    for k in range(5):
        difference = np.abs(reader[k]["image"].astype(int) - native.jpeg_decode(mixed[k]))
        assert (difference.max() > 4) == (k in (2, 3)), (k, difference.max())


def test_writes_that_lose_nothing_say_nothing(tmp_path, mixed):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        write(tmp_path / "own-planes.slip", mixed[:2] + [mixed[4], mixed[5]], "yuv420")
        write(tmp_path / "jpeg.slip", mixed, "jpeg")
    assert lossy_warnings(record) == []


def test_a_first_epoch_writing_planes_counts_its_losses_once_too(tmp_path, mixed):
    folder = tmp_path / "photos" / "things"
    folder.mkdir(parents=True)
    for k, data in enumerate(mixed[:5]):
        (folder / f"{k}.jpg").write_bytes(data)
    pipelines = {"image": [ss.ops.CenterCrop(16)], "label": None}
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with ss.Loader(tmp_path / "photos", 5, pipelines, order="sequential", write_mode="yuv420",
                       cache_dir=tmp_path / "cache", verbose=False) as loader:
            assert loader._epochs.first is not None  # the first epoch writes the file as it trains
            for _ in range(2):
                assert sum(len(batch[0]) for batch in loader) == 5
    told = lossy_warnings(record)
    assert len(told) == 1 and "field 'image': 2 of 5 samples (samples 2, 3)" in told[0], told
