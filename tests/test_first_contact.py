"""What a new user meets first, from Python: how a folder of images is
labelled wherever slipstream reads one, what writing does when the output
exists or its folder does not, and what the installed package says of
itself (version, licence, platforms, Python versions, type information)."""

from __future__ import annotations

import importlib.metadata
import inspect
import re
from pathlib import Path

import pytest

import slipstream as ss
from jpeg_corpus import make_sample
from slipstream.sources import ImageFolder

README = Path(__file__).resolve().parent.parent / "README.md"


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
    # Left out with a warning (tests/test_source_names.py: and a class folder without images is refused).
    with pytest.warns(ss.SourceWarning, match=r"tree: 5 images directly in it \('0.jpg', '1.jpg', '2.jpg' and 2 "
                                              r"more\) are left out"):
        source = ImageFolder(folder)
    assert not source.flat and source.classes == ["cat", "dog"]
    assert [(Path(p).relative_to(folder).as_posix(), label) for p, label in source.samples] == \
        [("cat/a.jpg", 0), ("dog/a.jpg", 1)]


def test_a_folder_without_images_names_both_layouts(tmp_path):
    (tmp_path / "nothing" / "sub").mkdir(parents=True)
    (tmp_path / "nothing" / "notes.txt").write_text("not an image")
    with pytest.raises(ss.ArgumentError, match=r"nothing has no images, neither in class subfolders "
                                               r"\(root/<class>/<image>\) nor directly in it \(root/<image>\)"):
        ss.write(tmp_path / "x.slip", tmp_path / "nothing", verbose=False)
    assert not (tmp_path / "x.slip").exists()


# ---------------------------------------------------------------- where a dataset is written


def test_an_existing_file_is_refused_before_encoding_unless_overwrite(tmp_path):
    target = tmp_path / "out.slip"
    target.write_bytes(b"not to be lost")
    undecodable = [(b"not a jpeg",)]  # encoding it would fail: the refusal comes first
    fields = {"image": ss.RGBImageField()}
    with pytest.raises(FileExistsError, match=rf"^{re.escape(str(target))} already exists; pass overwrite=True "
                                              r"\(--overwrite\) to replace it$"):
        ss.write(target, undecodable, fields, workers=0, verbose=False)
    assert target.read_bytes() == b"not to be lost"

    good = [(make_sample(32, 32, seed=1).data,)]
    assert ss.write(target, good, fields, workers=0, verbose=False, overwrite=True).samples == 1
    with pytest.raises(FileExistsError, match="already exists"):
        ss.convert(target, target, verbose=False)
    copy = ss.convert(target, tmp_path / "copy.slip", verbose=False).path
    assert ss.convert(target, copy, verbose=False, overwrite=True).samples == 1


def test_an_existing_sharded_dataset_is_refused_unless_overwrite(tmp_path):
    samples = [(make_sample(32, 32, seed=k).data,) for k in range(6)]
    fields = {"image": ss.RGBImageField()}
    first = ss.write(tmp_path / "ds", samples, fields, shards=2, workers=0, verbose=False)
    with pytest.raises(FileExistsError, match=r"ds already holds a slipstream dataset \(manifest.json\); "
                                              r"pass overwrite=True"):
        ss.write(tmp_path / "ds", samples[:3], fields, shards=3, workers=0, verbose=False)
    assert sorted(p.name for p in (tmp_path / "ds").iterdir()) == sorted([*first.shards, "manifest.json"])
    again = ss.write(tmp_path / "ds", samples[:3], fields, shards=3, workers=0, verbose=False, overwrite=True)
    with ss.open_dataset(tmp_path / "ds") as reader:
        assert len(reader) == 3
    assert sorted(p.name for p in (tmp_path / "ds").iterdir()) == sorted([*again.shards, "manifest.json"])


def test_the_output_folder_is_named_when_it_does_not_exist_or_is_no_folder(tmp_path):
    fields = {"x": ss.IntField()}
    missing = tmp_path / "no-such-folder" / "out.slip"
    with pytest.raises(FileNotFoundError) as caught:
        ss.write(missing, [(1,)], fields, workers=0, verbose=False)
    assert str(caught.value) == f"{missing} cannot be written: the folder {missing.parent} does not exist"
    assert ".tmp" not in str(caught.value) and not missing.parent.exists()

    (tmp_path / "a-file").write_text("")
    with pytest.raises(NotADirectoryError, match=r"a-file/out.slip cannot be written: .*a-file is not a folder"):
        ss.write(tmp_path / "a-file" / "out.slip", [(1,)], fields, workers=0, verbose=False)
    (tmp_path / "a-folder").mkdir()
    with pytest.raises(IsADirectoryError, match=r"a-folder is a folder; give the path of a file to write, or "
                                                r"shard_size= or shards="):
        ss.write(tmp_path / "a-folder", [(1,)], fields, workers=0, verbose=False)
    with pytest.raises(IsADirectoryError, match=r"new-folder/ names a folder \(it ends with a slash\); give the path "
                                                r"of a file to write, or shard_size= or shards="):
        ss.write(f"{tmp_path}/new-folder/", [(1,)], fields, workers=0, verbose=False)
    assert not (tmp_path / "new-folder").exists()
    with pytest.raises(NotADirectoryError, match=r"a-file is a file; a sharded dataset is written into a folder"):
        ss.write(tmp_path / "a-file", [(1,)], fields, shards=1, workers=0, verbose=False)


# ---------------------------------------------------------------- what the package says of itself


def test_the_installed_metadata_names_licence_platform_and_python_versions():
    metadata = importlib.metadata.metadata("slipstream")
    assert metadata["Version"] == ss.__version__
    assert metadata["Requires-Python"] == ">=3.10"
    assert metadata["License"] == "Apache-2.0"
    classifiers = set(metadata.get_all("Classifier"))
    assert "License :: OSI Approved :: Apache Software License" in classifiers
    assert {c for c in classifiers if c.startswith("Operating System ::")} == {"Operating System :: POSIX :: Linux"}
    assert {c for c in classifiers if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)} == \
        {f"Programming Language :: Python :: 3.{minor}" for minor in (10, 11, 12, 13)}
    assert "Typing :: Typed" in classifiers
    assert {"test", "s3", "ray", "coco", "notebooks"} <= set(metadata.get_all("Provides-Extra"))
    files = importlib.metadata.files("slipstream")
    assert any(f.name == "LICENSE" for f in files), "the licence text is not in the installed distribution"


def test_the_package_ships_its_type_information():
    assert (Path(ss.__file__).parent / "py.typed").is_file()
    for function in (ss.write, ss.cached, ss.convert, ss.open_dataset):
        hints = inspect.get_annotations(function)
        assert "return" in hints and set(inspect.signature(function).parameters) <= set(hints), function.__name__


def test_the_readme_claims_the_platforms_the_classifiers_name():
    text = README.read_text()
    assert "**Platforms.** slipstream is built and tested on Linux" in text
    assert "Windows is not supported" in text and "fcntl" in text
    claims = re.findall(r"on macOS and Windows|\(any OS\)", text)
    assert claims == [], f"the README claims platforms nothing tests: {claims}"
