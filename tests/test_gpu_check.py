"""``make gpu-check`` on a machine without CUDA: one line, exit 0; and its
steps that need no GPU (data, the marked tests, the training-step
benchmark's DataLoader and slipstream sides, scaling, the JSON), run on the
CPU with small sizes as ``--cpu`` does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from jpeg_corpus import make_sample
from PIL import Image

import slipstream as ss

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "gpu_check.py"

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the answer of a machine without CUDA")


def test_make_gpu_check_without_cuda_says_so_in_one_line_and_exits_0():
    proc = subprocess.run(["make", "-s", "gpu-check", f"GPU_PYTHON={sys.executable}"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"gpu-check: no CUDA device here (torch {torch.__version__}: "
                                        f"torch.cuda.is_available() is False); nothing to check"]


def test_the_steps_that_need_no_gpu_run_on_the_cpu(tmp_path):
    out, work, photos = tmp_path / "out", tmp_path / "work", tmp_path / "photos"
    photos.mkdir()
    for k in range(5):  # stand-ins for the sample photos, repeated to the size of the synthetic set
        (photos / f"n{k:08d}_photo.JPEG").write_bytes(make_sample(90 + 10 * k, 120, seed=k).data)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--cpu", "--no-install", "--images", "24", "--out", str(out),
                           "--work", str(work), "--photos", str(photos), "--budget", "900"],
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    report = json.loads((out / "gpu-check.json").read_text())
    steps = report["steps"]
    assert list(steps) == ["machine", "data", "tests-cuda", "training-step", "scaling"]
    assert all(step["exit_code"] == 0 and not step["timed_out"] for step in steps.values()), steps
    assert report["failed_steps"] == [] and report["mode"] == "cpu dry run"
    assert report["machine"]["slipstream"] == ss.__version__ and report["machine"]["cores"] >= 1

    # The data: both systems read the same JPEG bytes, in the same order, with the same labels.
    data = report["data"]
    assert data["synthetic"]["samples"] == data["synthetic"]["distinct_images"] == 24
    assert data["photos"]["samples"] == 25 and data["photos"]["distinct_images"] == 5
    assert data["photos-4x"]["samples"] == 15 and data["photos-4x"]["distinct_images"] == 5
    with Image.open(work / "data" / "photos-4x" / "images" / "n00000003_photo.JPEG") as enlarged:
        assert enlarged.size == (240, 2 * 120)
    for made in data.values():
        samples = json.loads((Path(made["folder"]) / "samples.json").read_text())
        reader = ss.Reader(made["file"])
        assert len(reader) == len(samples) == made["samples"]
        for index, (path, label) in enumerate(samples):
            assert reader.read(index, "label") == label == index % 1000
            assert bytes(reader.value_bytes(index, "image")) == Path(path).read_bytes()
    assert Path(samples[7][0]).name == "n00000002_photo.JPEG"

    # The marked tests are collected, and skip here.
    tests = steps["tests-cuda"]
    assert tests["skipped"] >= 15 and tests["passed"] == tests["failed"] == 0 and tests["failures"] == []
    assert (out / "tests-cuda.xml").exists()

    training = report["training_step"]
    assert training["dataset"] == str(work / "data" / "photos")
    assert training["device"] == "cpu" and training["model"] == "tiny" and training["rounds"] == 1
    rows = training["measurements"]
    assert set(rows) == {"ceiling", "slipstream/nothing", "dataloader/nothing", "slipstream/step", "dataloader/step"}
    for key, row in rows.items():
        assert row["images_per_s"] > 0 and len(row["runs"]) == 1 and 0 <= row["host_wait_fraction"] <= 1, key
        assert ("gpu_wait_fraction" in row) == key.endswith("/step")
    assert training["settings"]["dataloader"]["num_workers"] == 2
    assert training["ratios"]["slipstream_over_dataloader_nothing"] > 0

    scaling = report["scaling"]
    assert scaling["threads"] == [1, 2]
    assert set(scaling["pipelines"]) == {"train", "val", "train (direct)", "val (direct)"}
    for rows in scaling["pipelines"].values():
        assert rows["1"]["speedup"] == 1.0 and rows["2"]["images_per_s"] > 0 and rows["2"]["busy_cores"] > 0
    assert "gpu-check: 5 of 5 steps passed" in (out / "gpu-check.log").read_text()
