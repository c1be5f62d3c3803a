"""What a new user meets first, from Python: how a folder of images is
labelled wherever slipstream reads one."""

from __future__ import annotations

from pathlib import Path

import pytest

import slipstream as ss
from jpeg_corpus import make_sample
from slipstream.sources import ImageFolder


def flat_folder(root: Path) -> Path:
    """Four JPEGs and a PNG directly in ``root``, no subfolders."""
    root.mkdir(parents=True)
    for k in range(4):
        (root / f"{k}.jpg").write_bytes(make_sample(48, 64, seed=k).data)
    from PIL import Image

    Image.new("RGB", (64, 48), (200, 30, 30)).save(root / "4.png")
    return root


# ---------------------------------------------------------------- one labelling rule for folders


def test_a_flat_folder_is_one_class_labelled_0_for_write_cached_loader_and_demo(tmp_path, monkeypatch):
    folder = flat_folder(tmp_path / "pets")
    source = ImageFolder(folder)
    assert source.flat and source.classes == ["pets"]
    assert [(Path(p).name, label) for p, label in (source[i] for i in range(len(source)))] == \
        [("0.jpg", 0), ("1.jpg", 0), ("2.jpg", 0), ("3.jpg", 0), ("4.png", 0)]

    written = ss.write(tmp_path / "w.slip", folder, workers=0, verbose=False).path
    cached = ss.cached(folder, cache_dir=tmp_path / "cache", workers=0, verbose=False)
    for path in (written, cached):
        with ss.Reader(path) as reader:
            assert [reader[i]["label"] for i in range(len(reader))] == [0] * 5
            assert reader.user_metadata["classes"] == ["pets"]

    monkeypatch.setenv("SLIPSTREAM_CACHE_DIR", str(tmp_path / "loader-cache"))  # where Loader(folder) converts it
    with ss.Loader(folder, 5, {"image": None}, order="sequential", verbose=False) as loader:
        [(labels,)] = [[tensor.tolist() for tensor in batch] for batch in loader]
    assert labels == [0] * 5

    from slipstream.demo import _source

    demo, line = _source(str(folder), tmp_path, count=0)
    assert demo.samples == source.samples and demo.classes == ["pets"]
    assert line == f"5 images from {folder} (no class folders: label 0)"


def test_a_class_tree_numbers_its_sorted_classes_and_leaves_out_top_level_images(tmp_path):
    folder = flat_folder(tmp_path / "tree")  # images directly in the root: not read once classes exist
    for name in ("dog", "cat"):
        (folder / name).mkdir()
        (folder / name / "a.jpg").write_bytes(make_sample(48, 64, seed=len(name)).data)
    (folder / "empty").mkdir()
    source = ImageFolder(folder)
    assert not source.flat and source.classes == ["cat", "dog", "empty"]
    assert [(Path(p).relative_to(folder).as_posix(), label) for p, label in source.samples] == \
        [("cat/a.jpg", 0), ("dog/a.jpg", 1)]


def test_a_folder_without_images_names_both_layouts(tmp_path):
    (tmp_path / "nothing" / "sub").mkdir(parents=True)
    (tmp_path / "nothing" / "notes.txt").write_text("not an image")
    with pytest.raises(ss.ArgumentError, match=r"nothing has no images, neither in class subfolders "
                                               r"\(root/<class>/<image>\) nor directly in it \(root/<image>\)"):
        ss.write(tmp_path / "x.slip", tmp_path / "nothing", verbose=False)
    assert not (tmp_path / "x.slip").exists()
