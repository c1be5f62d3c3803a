"""Sources whose file names are not UTF-8 (Linux names are bytes: a Latin-1
``café.jpg`` is ``b"caf\\xe9.jpg"``, which Python gives with a surrogate
escape), written and read back; and what sources leave out: images directly
in a folder of class folders, tar members no field reads (warned of, by
name), class folders without images (refused, as torchvision refuses them)."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import warnings
from pathlib import Path

import numpy as np
import pytest

import slipstream as ss
from slipstream import native
from slipstream.errors import DatasetNotFoundError, SourceWarning
from slipstream.sources import ImageFolder

CAFE = b"caf\xe9"  # "café" in Latin-1: not UTF-8


def jpeg(value: int) -> bytes:
    """A small real JPEG of one grey level."""
    return native.jpeg_encode(np.full((8, 12, 3), value, np.uint8), 95)


def put(root: bytes, relative: bytes, data: bytes) -> None:
    """Write ``data`` at ``root/relative``, both bytes, making its folder."""
    path = os.path.join(root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as file:
        file.write(data)


def source_warnings(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, SourceWarning)]


# ---------------------------------------------------------------- names that are not UTF-8


@pytest.fixture
def latin1_folder(tmp_path) -> tuple[str, list[tuple[bytes, int]]]:
    """A folder of class folders with Latin-1 names, its photos' names too,
    and the (name, grey level) of each photo in label order."""
    root = os.fsencode(tmp_path / "photos")
    photos = [(CAFE + b"/" + CAFE + b".jpg", 40), (CAFE + b"/na\xefve.jpg", 80), (b"dog/d\xf6g.jpg", 120)]
    for name, level in photos:
        put(root, name, jpeg(level))
    return os.fsdecode(root), photos


def test_a_folder_with_names_that_are_not_utf8_is_written_and_read_back(tmp_path, latin1_folder):
    root, photos = latin1_folder
    target = os.fsdecode(os.fsencode(tmp_path) + b"/" + CAFE + b".slip")  # the dataset's own name too
    result = ss.write(target, root, workers=0, verbose=False)
    assert result.samples == 3
    dataset = ss.Reader(target)
    assert dataset.user_metadata["classes"] == [os.fsdecode(CAFE), "dog"]
    assert os.fsencode(dataset.user_metadata["classes"][0]) == CAFE  # the folder's own bytes again
    for k, (_, level) in enumerate(photos):
        assert dataset[k]["label"] == (0 if k < 2 else 1)
        assert abs(int(dataset[k]["image"].mean()) - level) <= 2


def test_a_sharded_write_of_such_a_folder_keeps_its_class_names(tmp_path, latin1_folder):
    root, _ = latin1_folder
    ss.write(tmp_path / "sharded", root, shards=2, workers=0, verbose=False)
    with ss.open_dataset(tmp_path / "sharded") as dataset:
        assert os.fsencode(dataset.user_metadata["classes"][0]) == CAFE
        assert [dataset.read(k, "label") for k in range(len(dataset))] == [0, 0, 1]


def test_the_dataset_cache_keys_a_folder_with_names_that_are_not_utf8(tmp_path, latin1_folder):
    root, _ = latin1_folder
    cached = ss.cached(root, cache_dir=tmp_path / "cache", workers=0, verbose=False)
    assert len(ss.open_dataset(cached)) == 3
    assert ss.cached(root, cache_dir=tmp_path / "cache", workers=0, verbose=False) == cached


def test_fingerprints_of_utf8_names_are_unchanged(tmp_path):
    root = tmp_path / "photos"
    for name in ("caf\u00e9/b\u00e9b\u00e9.jpg", "dog/d.jpg"):
        put(os.fsencode(root), name.encode(), jpeg(50))
    folder = ImageFolder(root)
    digest = hashlib.sha256()  # the fingerprint as it was: dataset files cached before stay found
    for path, label in folder.samples:
        stat = path.stat()
        digest.update(f"{path.relative_to(root)}\0{label}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    assert folder.fingerprint() == digest.hexdigest()


def test_an_unreadable_photo_with_a_latin1_name_is_named_in_printable_text(tmp_path, latin1_folder):
    root, _ = latin1_folder
    put(os.fsencode(root), b"dog/br" + b"\xfbl\xe9.jpg", b"\xff\xd8\xff not a jpeg")
    result = ss.write(tmp_path / "skipped.slip", root, workers=0, verbose=False, on_error="skip")
    assert result.samples == 3 and len(result.skipped) == 1
    reason = result.skipped[0][1]
    assert "dog/br\\xfbl\\xe9.jpg" in reason
    reason.encode("utf-8")  # a terminal can show it


def test_tar_shards_with_names_that_are_not_utf8_are_written(tmp_path):
    shard = os.fsencode(tmp_path) + b"/" + CAFE + b"-000.tar"
    members = [(f"k{k}.jpg", jpeg(30 * k)) for k in range(3)] + [(f"k{k}.cls", b"%d" % k) for k in range(3)]
    with tarfile.open(shard, "w") as tar:
        for name, data in sorted(members, key=lambda m: m[0][:2]):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    target = tmp_path / "shards.slip"
    ss.write(target, os.fsdecode(shard), workers=0, verbose=False)
    assert [ss.Reader(target)[k]["label"] for k in range(3)] == [0, 1, 2]


# ---------------------------------------------------------------- what a folder of class folders leaves out


def test_images_directly_in_a_folder_of_class_folders_are_warned_of(tmp_path):
    root = os.fsencode(tmp_path / "classes")
    for name in (b"cat/c.jpg", b"dog/d.jpg", b"loose-1.jpg", b"loose-2.png", b"notes.txt"):
        put(root, name, jpeg(90))
    with pytest.warns(SourceWarning, match=r"classes: 2 images directly in it \('loose-1.jpg', 'loose-2.png'\) are "
                                           r"left out: .*To include them, move them into a class folder"):
        folder = ImageFolder(os.fsdecode(root))
    assert len(folder) == 2 and folder.classes == ["cat", "dog"]


def test_a_folder_of_class_folders_without_loose_images_says_nothing(tmp_path):
    root = os.fsencode(tmp_path / "classes")
    for name in (b"cat/c.jpg", b"dog/d.jpg", b"README.txt"):
        put(root, name, jpeg(90))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        ImageFolder(os.fsdecode(root))
    assert source_warnings(record) == []


def test_a_class_folder_without_images_is_refused_naming_it(tmp_path):
    root = tmp_path / "classes"
    for name in (b"cat/c.jpg", b"dog/d.jpg", b"empty/notes.txt"):
        put(os.fsencode(root), name, jpeg(90))
    (root / "bare").mkdir()
    for attempt in (lambda: ImageFolder(root), lambda: ss.write(tmp_path / "x.slip", root, verbose=False)):
        with pytest.raises(DatasetNotFoundError, match=r"classes: 2 of its 4 class folders hold no image "
                                                       r"\('bare', 'empty'; .*Put images in it, or move it out of"):
            attempt()
    assert issubclass(DatasetNotFoundError, FileNotFoundError)  # what torchvision's ImageFolder raises


def test_a_flat_folder_with_an_empty_subfolder_stays_flat(tmp_path):
    root = tmp_path / "flat"
    for name in (b"a.jpg", b"b.jpg"):
        put(os.fsencode(root), name, jpeg(60))
    (root / ".ipynb_checkpoints").mkdir()
    folder = ImageFolder(root)
    assert folder.flat and len(folder) == 2


# ---------------------------------------------------------------- tar members no field reads


def shard_of(path: Path, samples: list[dict[str, bytes]]) -> str:
    """A tar shard of ``samples`` (extension -> bytes, under keys s0, s1, ...)."""
    with tarfile.open(path, "w") as tar:
        for k, sample in enumerate(samples):
            for extension, data in sample.items():
                info = tarfile.TarInfo(f"s{k}.{extension}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return str(path)


def test_tar_members_that_no_field_reads_are_warned_of_once(tmp_path):
    shard = shard_of(tmp_path / "labels.tar", [{"jpeg": jpeg(20 * k), "label.txt": b"%d" % k} for k in range(4)])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result = ss.write(tmp_path / "images.slip", shard, workers=0, verbose=False)
    told = source_warnings(record)
    assert len(told) == 1, told
    assert told[0].startswith("4 tar members of 4 samples match no field and were left out: .label.txt (4, the first "
                              f"in {shard}: s0)")
    assert "members={'<field>': 'label.txt'}" in told[0]
    assert result.samples == 4 and list(ss.Reader(tmp_path / "images.slip").fields) == ["image"]


def test_tar_members_read_by_a_field_say_nothing(tmp_path):
    shard = shard_of(tmp_path / "labels.tar", [{"jpeg": jpeg(20 * k), "label.txt": b"%d" % k} for k in range(4)])
    source = ss.WebDataset(shard, fields={"image": ss.RGBImageField(), "label": ss.JSONField()},
                           members={"label": "label.txt"})
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        ss.write(tmp_path / "both.slip", source, workers=0, verbose=False)
    assert source_warnings(record) == []
    assert [ss.Reader(tmp_path / "both.slip")[k]["label"] for k in range(4)] == ["0", "1", "2", "3"]


def test_the_command_line_shows_such_names_escaped_rather_than_failing(tmp_path, monkeypatch, capsys):
    from slipstream.cli import main

    monkeypatch.setenv("SLIPSTREAM_CACHE_DIR", str(tmp_path / "cache"))
    root = os.fsencode(tmp_path) + b"/" + CAFE
    put(root, b"dog/d\xf6g.jpg", jpeg(60))
    ss.cached(os.fsdecode(root), workers=0, verbose=False)
    for command in (["cache", "list"], ["info", os.fsdecode(root)], ["cache", "prune", "--all", "--dry-run"]):
        assert main(command) == 0, capsys.readouterr().err
        shown = capsys.readouterr().out
        assert "caf\\xe9" in shown, (command, shown)
