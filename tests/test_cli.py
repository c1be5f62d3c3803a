"""The command line: write, info, convert, bench and demo, run as a user
runs them: the installed ``slipstream`` command."""

from __future__ import annotations

import importlib.metadata
import json
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import slipstream as ss
from slipstream.sources import synthetic_folder
from cli_command import run_slipstream as run, slipstream_command
from jpeg_corpus import make_sample, stored

README = Path(__file__).resolve().parent.parent / "README.md"


def test_write_info_and_convert(tmp_path):
    for label, name in enumerate(["ant", "bee"]):
        (tmp_path / "tree" / name).mkdir(parents=True)
        for k in range(3):
            (tmp_path / "tree" / name / f"{k}.jpg").write_bytes(make_sample(40 + k, 60 + 30 * label, seed=k).data)

    written = run("write", "tree", "out.slip", "--workers", "2", "--page-checksums", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert "wrote out.slip: 6 samples" in written.stdout

    info = run("info", "out.slip", "--verify-pages", cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    for expected in ("6 samples", "image: RGBImageField(write_mode='jpeg'", "height 40..42 (median 41)",
                     "width 60..90", "longer side: 0-64: 3, 64-128: 3", "stored as: 6 JPEG, 0 raw, 0 YCbCr 4:2:0 planes", "label: IntField()",
                     "classes=['ant', 'bee']", "pages: verified"):
        assert expected in info.stdout, (expected, info.stdout)

    converted = run("convert", "out.slip", "copy.slip", cwd=tmp_path)
    assert converted.returncode == 0, converted.stderr
    original, copy = ss.Reader(tmp_path / "out.slip"), ss.Reader(tmp_path / "copy.slip")
    assert copy.user_metadata == original.user_metadata and len(copy) == 6
    for i in range(6):
        assert bytes(copy.value_bytes(i, "image")) == bytes(original.value_bytes(i, "image"))
        assert copy[i]["label"] == original[i]["label"]

    for command in (["write", "tree", "tiled.slip", "--workers", "0"], ["convert", "out.slip", "tiled-copy.slip"]):
        tiled = run(*command, "--tile-width", "16", cwd=tmp_path)
        assert tiled.returncode == 0, tiled.stderr
        with ss.Reader(tmp_path / command[2]) as reader:
            assert reader.fields["image"].tile_width == 16
            for i in range(6):
                np.testing.assert_array_equal(reader[i]["image"], original[i]["image"])


def test_errors_are_one_line_and_exit_1(tmp_path):
    missing = run("info", "missing.slip", cwd=tmp_path)
    assert missing.returncode == 1 and missing.stderr.strip() == "slipstream info: missing.slip: no such dataset file"
    (tmp_path / "junk.slip").write_bytes(b"\0" * 300)
    junk = run("info", "junk.slip", cwd=tmp_path)
    assert junk.returncode == 1 and "junk.slip: not a slipstream dataset" in junk.stderr
    no_folder = run("write", "nowhere", "x.slip", cwd=tmp_path)
    assert no_folder.returncode == 1 and "nowhere does not exist" in no_folder.stderr


def test_ctrl_c_is_one_line_with_the_status_of_sigint_and_leaves_no_output(tmp_path):
    synthetic_folder(tmp_path / "images", count=2000, height=64, width=64, verbose=False)
    writing = subprocess.Popen([slipstream_command(), "write", "images", "out.slip", "--workers", "0"], cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".out.slip.*.tmp")) and writing.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    writing.send_signal(signal.SIGINT)
    _, err = writing.communicate(timeout=120)
    assert writing.returncode == 130 and "slipstream write: interrupted" in err and "Traceback" not in err, err
    assert not (tmp_path / "out.slip").exists() and not list(tmp_path.glob(".*.tmp"))


def test_demo_streams_a_generated_folder_and_saves_a_labelled_grid(tmp_path):
    from PIL import Image

    demo = run("demo", "--count", "48", "--epochs", "2", "--grid", "grid.png", cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert "48 generated JPEGs (shapes, 6 classes)" in demo.stdout
    rates = [line for line in demo.stdout.splitlines() if line.startswith("epoch ")]
    assert len(rates) == 2 and all("images/s" in line and "48 images" in line for line in rates), demo.stdout
    with Image.open(tmp_path / "grid.png") as grid:
        # 32 tiles of 224 x 224, 8 per row, each with an 18-pixel caption strip.
        assert grid.size == (8 * 224, 4 * (224 + 18))
        caption = np.asarray(grid.crop((0, 224, 224, 242)).convert("L"))
        assert caption.min() < 100 and np.median(caption) == 255  # dark label text on the white strip


def test_demo_reads_a_flat_folder_of_the_users_jpegs(tmp_path):
    (tmp_path / "mine").mkdir()
    for k in range(5):
        (tmp_path / "mine" / f"{k}.jpg").write_bytes(make_sample(64, 80, seed=k).data)
    demo = run("demo", "--data", "mine", "--epochs", "1", "--grid", "", cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert "5 images from mine (no class folders: label 0)" in demo.stdout
    assert not list(tmp_path.glob("*.png"))


def test_bench_streams_a_file_through_each_pipeline(tmp_path):
    source = [(make_sample(60, 80, seed=k).data, k % 2) for k in range(20)]
    ss.write(tmp_path / "d.slip", source, {"image": ss.RGBImageField(), "label": ss.IntField()}, workers=0,
             verbose=False)
    for pipeline in ("train", "val", "bytes"):
        bench = run("bench", "d.slip", "--pipeline", pipeline, "--epochs", "2", "--batch-size", "8", cwd=tmp_path)
        assert bench.returncode == 0, bench.stderr
        epochs = [line for line in bench.stdout.splitlines() if line.startswith("epoch ")]
        assert len(epochs) == 2 and all("20 images" in line for line in epochs), bench.stdout
    wrong = run("bench", "d.slip", "--field", "caption", cwd=tmp_path)
    assert wrong.returncode == 1 and "has no field 'caption'" in wrong.stderr


def test_bench_and_demo_refuse_counts_they_cannot_run_in_one_line(tmp_path):
    ss.write(tmp_path / "d.slip", [(make_sample(60, 80, seed=0).data, 0)],
             {"image": ss.RGBImageField(), "label": ss.IntField()}, workers=0, verbose=False)
    for command, expected in [(["bench", "d.slip", "--epochs", "0"], "epochs must be a positive integer, got 0"),
                              (["bench", "d.slip", "--threads", "0"], "num_threads must be None or an integer "
                                                                       "from 1 to "),
                              (["demo", "--epochs", "0"], "epochs must be a positive integer, got 0"),
                              (["demo", "--count", "0"], "count must be a positive integer, got 0")]:
        done = run(*command, cwd=tmp_path)
        assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, (command, done.stderr)
        assert done.stderr.startswith(f"slipstream {command[0]}: {expected}"), (command, done.stderr)
    assert not list(tmp_path.glob("*.png"))


def test_info_describes_a_detection_dataset(tmp_path):
    from detection_data import make_coco

    data = make_coco(tmp_path / "coco", count=6, seed=2)
    path = tmp_path / "coco.slip"
    ss.write(path, ss.COCODetection(data.images_root, data.annotation_file), verbose=False)
    result = run("info", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    boxes = sum(len(image.boxes) for image in data.images)
    assert "  boxes: RaggedField" in result.stdout and f"    rows: {boxes:,} in all" in result.stdout
    assert "  masks: InstanceMasksField()" in result.stdout and "stored as" not in result.stdout.split("masks:")[1]


def class_tree(root: Path, per_class: int = 3) -> Path:
    """A small ``root/<class>/<image>`` folder of JPEGs, two classes."""
    for label, name in enumerate(["ant", "bee"]):
        (root / name).mkdir(parents=True)
        for k in range(per_class):
            (root / name / f"{k}.jpg").write_bytes(make_sample(40 + k, 60 + 30 * label, seed=k).data)
    return root


def test_version_is_the_installed_distributions(tmp_path):
    version = importlib.metadata.version("slipstream")
    result = run("--version", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"slipstream {version}\n"
    assert ss.__version__ == version
    if sys.version_info >= (3, 11):  # tomllib: pyproject.toml is where the version is written
        import tomllib

        pyproject = tomllib.loads((README.parent / "pyproject.toml").read_text())
        assert pyproject["project"]["version"] == version, "the installed slipstream is not this checkout's"


def readme_commands(block_marker: str) -> list[list[str]]:
    """The commands of the README's bash block that holds ``block_marker``,
    each split into words, comments left out."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.DOTALL)
    [block] = [b for b in blocks if block_marker in b]
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


def test_the_readmes_write_then_info_verify_pages_works_as_documented(tmp_path):
    commands = readme_commands("slipstream info train.slip --verify-pages")
    write, info = commands[0], commands[1]
    assert write[:2] == ["slipstream", "write"] and info == ["slipstream", "info", "train.slip", "--verify-pages"]
    folder = class_tree(tmp_path / "images")
    written = run(*[str(folder) if word == "/data/imagenet/train" else word for word in write[1:]], cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert "wrote train.slip: 6 samples" in written.stdout
    described = run(*info[1:], cwd=tmp_path)
    assert described.returncode == 0, described.stderr
    assert "6 samples" in described.stdout and "pages: verified" in described.stdout
    assert described.stderr == ""


def test_info_verify_pages_without_checksums_prints_the_report_and_names_the_fix(tmp_path):
    class_tree(tmp_path / "tree")
    written = run("write", "tree", "bare.slip", "--workers", "0", "--no-page-checksums", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    info = run("info", "bare.slip", "--verify-pages", cwd=tmp_path)
    assert info.returncode == 0, info.stderr  # the check could not run; nothing is known to be wrong
    for expected in ("bare.slip: Reader, 6 samples", "label: IntField()", "classes=['ant', 'bee']",
                     "pages: none stored, so not verified"):
        assert expected in info.stdout, (expected, info.stdout)
    assert info.stderr.startswith("slipstream info: --verify-pages: bare.slip has no page checksums")
    for named in ("were not checked", "slipstream convert bare.slip COPY", "--page-checksums", "page_checksums=True"):
        assert named in info.stderr, (named, info.stderr)
    # The fix the message names gives a file whose pages verify.
    copied = run("convert", "bare.slip", "checked.slip", cwd=tmp_path)
    assert copied.returncode == 0, copied.stderr
    verified = run("info", "checked.slip", "--verify-pages", cwd=tmp_path)
    assert verified.returncode == 0 and "pages: verified" in verified.stdout, verified.stderr


def test_info_verify_pages_names_a_damaged_page_after_the_report(tmp_path):
    class_tree(tmp_path / "tree")
    assert run("write", "tree", "d.slip", "--workers", "0", cwd=tmp_path).returncode == 0
    with ss.Reader(tmp_path / "d.slip") as reader:
        start, _ = reader.page_span(0)
    data = bytearray((tmp_path / "d.slip").read_bytes())
    data[start + 100] ^= 0xFF
    (tmp_path / "d.slip").write_bytes(bytes(data))
    info = run("info", "d.slip", "--verify-pages", cwd=tmp_path)
    assert info.returncode == 1
    assert "d.slip: Reader, 6 samples" in info.stdout and "pages: a damaged page (below)" in info.stdout
    assert info.stderr.startswith("slipstream info: ") and "data page 0" in info.stderr
    assert "does not match its checksum" in info.stderr


@pytest.mark.parametrize("command", ["write", "convert"])
def test_an_existing_output_is_replaced_only_with_overwrite(tmp_path, command):
    class_tree(tmp_path / "tree")
    assert run("write", "tree", "source.slip", "--workers", "0", cwd=tmp_path).returncode == 0
    source = "tree" if command == "write" else "source.slip"
    (tmp_path / "out.slip").write_bytes(b"the user's own file")
    refused = run(command, source, "out.slip", cwd=tmp_path)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr == (f"slipstream {command}: out.slip already exists; pass overwrite=True (--overwrite) to "
                              f"replace it\n")
    assert (tmp_path / "out.slip").read_bytes() == b"the user's own file"
    replaced = run(command, source, "out.slip", "--overwrite", cwd=tmp_path)
    assert replaced.returncode == 0, replaced.stderr
    with ss.Reader(tmp_path / "out.slip") as reader:
        assert len(reader) == 6


def test_an_empty_path_is_refused_not_taken_for_the_current_folder(tmp_path):
    class_tree(tmp_path / "tree")
    assert run("write", ".", "d.slip", "--workers", "0", cwd=tmp_path / "tree").returncode == 0
    for command in (["write", "", "x.slip"], ["write", ".", ""], ["info", ""], ["convert", "", "x.slip"],
                    ["bench", ""], ["demo", "--data", ""]):
        done = run(*command, cwd=tmp_path / "tree")
        assert done.returncode == 2 and done.stdout == "", (command, done.stdout)
        assert done.stderr.splitlines()[-1].endswith("an empty path (the current folder would be taken for it): "
                                                     "give a path"), (command, done.stderr)
    assert sorted(p.name for p in (tmp_path / "tree").iterdir()) == ["ant", "bee", "d.slip"]


def test_ray_without_ray_installed_is_one_line_naming_the_extra(tmp_path):
    import subprocess

    class_tree(tmp_path / "tree")
    blocked = "import sys; sys.modules['ray'] = None; from slipstream.cli import main; sys.exit(main())"  # no ray
    done = subprocess.run([sys.executable, "-c", blocked, "write", "tree", "out", "--ray"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 1 and done.stdout == "", done.stdout
    assert done.stderr.startswith("slipstream write: --ray needs Ray, which this Python cannot import ("), done.stderr
    assert done.stderr.endswith("pip install 'slipstream[ray]'\n") and len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_an_output_folder_that_does_not_exist_is_named(tmp_path):
    class_tree(tmp_path / "tree")
    result = run("write", "tree", "missing/out.slip", "--workers", "0", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr == "slipstream write: missing/out.slip cannot be written: the folder missing does not exist\n"
    assert not (tmp_path / "missing").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["tree"]


def test_write_labels_a_flat_folder_as_the_demo_does(tmp_path):
    (tmp_path / "flat").mkdir()
    for k in range(4):
        (tmp_path / "flat" / f"{k}.jpg").write_bytes(make_sample(48, 64, seed=k).data)
    written = run("write", "flat", "flat.slip", "--workers", "0", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    with ss.Reader(tmp_path / "flat.slip") as reader:
        assert [reader[i]["label"] for i in range(len(reader))] == [0, 0, 0, 0]
        assert reader.user_metadata["classes"] == ["flat"]


def test_write_reads_the_shards_a_shard_index_lists(tmp_path):
    from test_sources import jpegs, write_tars

    images = jpegs(7)
    shards = write_tars(tmp_path / "wds", images, per_shard=4)
    index = {"wids_version": 1, "shardlist": [{"url": f"wds/{Path(shard).name}", "nsamples": n}
                                              for shard, n in zip(shards, (4, 3))]}
    (tmp_path / "train.json").write_text(json.dumps(index))
    written = run("write", "train.json", "out.slip", "--workers", "0", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    with ss.Reader(tmp_path / "out.slip") as reader:
        assert [bytes(reader.value_bytes(k, "image")) for k in range(len(reader))] == [stored(i) for i in images]
        assert [reader[k]["label"] for k in range(len(reader))] == [k % 10 for k in range(7)]


def test_write_reads_a_folder_with_an_index_json_of_its_own_as_images(tmp_path):
    class_tree(tmp_path / "tree")
    (tmp_path / "tree" / "index.json").write_text('{"about": "not a LitData index"}')  # a folder's own file
    written = run("write", "tree", "cli.slip", "--workers", "0", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    ss.write(tmp_path / "api.slip", tmp_path / "tree", workers=0, verbose=False)
    assert (tmp_path / "cli.slip").read_bytes() == (tmp_path / "api.slip").read_bytes()


def test_write_asks_which_to_read_of_a_folder_holding_tar_shards_and_folders_of_images(tmp_path):
    from test_sources import jpegs, write_tars

    for k, data in enumerate(jpegs(4, seed=19)):
        (tmp_path / "train" / ("cat", "dog")[k % 2]).mkdir(parents=True, exist_ok=True)
        (tmp_path / "train" / ("cat", "dog")[k % 2] / f"{k}.jpg").write_bytes(data)
    write_tars(tmp_path / "train", jpegs(2, seed=20), per_shard=10)  # a backup beside the class folders
    mixed = run("write", "train", "out.slip", cwd=tmp_path)
    assert mixed.returncode == 1 and not (tmp_path / "out.slip").exists()
    assert mixed.stderr.strip() == ("slipstream write: train holds both tar shards (1, such as train-000000.tar) and "
                                    "folders of images (2, such as cat/): say which to read, "
                                    "slipstream.sources.ImageFolder('train') or slipstream.WebDataset('train')")


def test_shards_is_at_most_that_many_as_its_help_says(tmp_path):
    class_tree(tmp_path / "tree")
    assert "at most this many shards" in " ".join(run("write", "--help", cwd=tmp_path).stdout.split())
    for page_size, count in ((1 << 23, 1), (4096, 3)):  # six images of 2.5 KB: all in one page, or two per page
        done = run("write", "tree", f"out-{page_size}", "--shards", "4", "--page-size", str(page_size), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert f"6 samples in {count} shards" in done.stdout
