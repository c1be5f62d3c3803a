"""The README's quickstart is real code: it runs, as written, on a generated
image folder in a fresh interpreter, and trains."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import slipstream as ss

README = Path(__file__).resolve().parent.parent / "README.md"


def python_block(heading: str) -> str:
    """The one Python block of the README section starting with ``heading``."""
    section = README.read_text().split(heading, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, f"the section {heading!r} holds exactly one Python block"
    return blocks[0]


def quickstart() -> str:
    return python_block("## Quickstart")


def test_quickstart_trains_on_an_image_folder(tmp_path):
    from slipstream.sources import CLASSES, synthetic_folder

    folder = synthetic_folder(tmp_path / "my_images", count=96, height=120, width=160, verbose=False)
    code = quickstart()
    assert code.count('"/data/my_images"') == 1
    code = code.replace('"/data/my_images"', repr(str(folder)))
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600,
                          cwd=tmp_path)  # not the repository: its source tree has no built library
    assert proc.returncode == 0, proc.stderr[-3000:]
    losses = [float(v) for v in re.findall(r"epoch \d+: loss ([0-9.]+)", proc.stdout)]
    assert len(losses) == 3, proc.stdout
    assert all(0 < v < 10 for v in losses)
    # ss.cached wrote the dataset once, with the folder's classes.
    files = list((tmp_path / "cache" / "datasets").glob("*"))
    assert len([f for f in files if f.suffix == ".slip"]) == 1, files
    import slipstream as ss

    with ss.Reader(next(f for f in files if f.suffix == ".slip")) as reader:
        assert reader.user_metadata["classes"] == sorted(CLASSES)
        assert len(reader) == 96


def test_the_training_recipe_trains_with_mixed_labels_and_repeats(tmp_path):
    """On a folder of fewer than 256 images, with the order the README says
    to pass for one (torchvision's epoch rounds the samples down to 256s)."""
    from slipstream.sources import synthetic_folder

    folder = synthetic_folder(tmp_path / "my_images", count=64, height=72, width=96, verbose=False)
    code = python_block("## Training recipes")
    assert code.count('"/data/my_images"') == 1
    code = code.replace('"/data/my_images"', repr(str(folder)))
    after_block = README.read_text().split("## Training recipes", 1)[1].split("\n## ", 1)[0].split("```", 2)[2]
    small = 'order=ss.Order("random", repeats=4, selected_round=0)'
    assert small in after_block.replace("\n", " ")
    assert code.count('order=ss.Order("random", repeats=4)') == 1
    code = code.replace('order=ss.Order("random", repeats=4)', small)
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = re.findall(r"epoch \d+: loss ([0-9.]+), (\d+) of 64 right", proc.stdout)
    assert len(results) == 2, proc.stdout
    assert all(0 < float(loss) < 10 and 0 <= int(right) <= 64 for loss, right in results)


def test_progressive_resizing_follows_ffcvs_schedule_from_one_compile(tmp_path):
    """The README's progressive resizing, over epochs 62, 68 and 74 of its
    88 (160, 160 and 192 px): each epoch at the schedule's size, the stage
    compiled once (one compile record)."""
    from slipstream.sources import synthetic_folder

    folder = synthetic_folder(tmp_path / "my_images", count=64, height=72, width=96, verbose=False)
    code = python_block("## Progressive resizing")
    assert code.count('"/data/my_images"') == 1 and code.count("range(88)") == 1
    code = code.replace('"/data/my_images"', repr(str(folder))).replace("range(88)", "range(62, 80, 6)")
    code = ("import logging; logging.basicConfig(level=logging.INFO, format='%(name)s: %(message)s')\n" + code)
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sizes = [(int(e), int(px)) for e, px in re.findall(r"epoch (\d+): (\d+) px", proc.stdout)]
    assert sizes == [(62, 160), (68, 160), (74, 192)], proc.stdout
    records = re.findall(r"slipstream.compiler: (compiled|loaded|reused) stage 0", proc.stderr)
    assert len(records) == 1, proc.stderr[-3000:]


def object_storage_example() -> str:
    return python_block("## Datasets in object storage")


def test_object_storage_example_runs_against_a_real_s3_server(s3_server, tmp_path):
    from slipstream.sources import synthetic_folder

    folder = synthetic_folder(tmp_path / "train", count=48, height=120, width=160, verbose=False)
    code = object_storage_example()
    assert code.count('"/data/imagenet/train"') == 1 and code.count('"s3://my-bucket/imagenet/train"') == 2
    code = code.replace('"/data/imagenet/train"', repr(str(folder))).replace("s3://my-bucket/", "s3://test/readme/")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "SLIPSTREAM_CACHE_DIR"} \
        | s3_server.env()
    env["HOME"] = str(tmp_path)  # the default cache folder, ~/.cache/slipstream/pages
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = ast.literal_eval(proc.stdout.strip().splitlines()[-1])  # the printed dict of the cache counters
    assert stats["downloads"] > 0 and stats["bytes"] > 0 and stats["evictions"] == 0
    assert list((tmp_path / ".cache" / "slipstream" / "pages").rglob("*.page"))


def test_ray_example_converts_tar_shards_in_a_real_s3_server(s3_server, tmp_path):
    pytest.importorskip("ray")
    webdataset = pytest.importorskip("webdataset")
    from slipstream import native
    from slipstream.format.objectstore import ObjectPrefix

    code = python_block("## Converting a large dataset on a Ray cluster")
    assert code.count("s3://my-bucket/") == 2
    code = code.replace("s3://my-bucket/", "s3://test/readme-ray/")
    prefix = ObjectPrefix("s3://test/readme-ray/laion", ss.Remote(storage_options=s3_server.storage_options()))
    for shard in range(4):
        tar = tmp_path / f"{shard:06d}.tar"
        with webdataset.TarWriter(str(tar)) as sink:
            for k in range(10):
                pixels = np.full((16, 16, 3), 20 * k + shard, np.uint8)
                sink.write({"__key__": f"{shard}-{k}", "jpg": native.jpeg_encode(pixels, 90), "cls": k})
        prefix.put_file(tar.name, tar)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | s3_server.env()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "40 samples in 1 shards"
    with ss.open_dataset("s3://test/readme-ray/laion-slip", remote=ss.Remote(storage_options=s3_server.storage_options(),
                                                                       cache_dir=tmp_path / "cache")) as reader:
        assert [reader[i]["label"] for i in range(40)] == list(range(10)) * 4


def test_detection_example_runs_on_a_generated_coco_dataset(tmp_path):
    from detection_data import make_coco

    data = make_coco(tmp_path / "coco", count=12, seed=3)
    code = python_block("## Detection and segmentation")
    code = code.replace('"/data/coco/train2017"', repr(str(data.images_root)))
    code = code.replace('"/data/coco/instances_train2017.json"', repr(str(data.annotation_file)))
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = re.search(r"(\d+) images, (\d+) boxes", proc.stdout)
    assert found and int(found.group(1)) == 12, proc.stdout
    assert 0 < int(found.group(2)) <= sum(len(image.boxes) for image in data.images)


def test_video_example_loads_windows_from_a_generated_video_folder(tmp_path):
    import real_photos
    from slipstream.sources.synthetic_video import synthetic_video_folder

    folder = synthetic_video_folder(tmp_path / "videos", [real_photos.pixels("coffee"), real_photos.pixels("chelsea")],
                                    per_class=2, seconds=1.5, size=(120, 160))
    code = python_block("## Video").replace('"/data/kinetics/train"', repr(str(folder)))
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = re.search(r"\(4, 3, 16, 112, 112\) \[([\d, ]+)\]", proc.stdout)
    assert found and sorted(map(int, found.group(1).split(", "))) == [0, 0, 1, 1], proc.stdout
