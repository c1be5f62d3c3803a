"""The command line: write, info and convert, run as a user runs them."""

from __future__ import annotations

import subprocess
import sys

import slipstream as ss
from jpeg_corpus import make_sample


def run(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "slipstream", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


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
                     "width 60..90", "longer side: 0-64: 3, 64-128: 3", "stored as: 6 JPEG, 0 raw", "label: IntField()",
                     "classes=['ant', 'bee']", "pages: verified"):
        assert expected in info.stdout, (expected, info.stdout)

    converted = run("convert", "out.slip", "copy.slip", cwd=tmp_path)
    assert converted.returncode == 0, converted.stderr
    original, copy = ss.Reader(tmp_path / "out.slip"), ss.Reader(tmp_path / "copy.slip")
    assert copy.user_metadata == original.user_metadata and len(copy) == 6
    for i in range(6):
        assert bytes(copy.value_bytes(i, "image")) == bytes(original.value_bytes(i, "image"))
        assert copy[i]["label"] == original[i]["label"]


def test_errors_are_one_line_and_exit_1(tmp_path):
    missing = run("info", "missing.slip", cwd=tmp_path)
    assert missing.returncode == 1 and missing.stderr.strip() == "slipstream info: missing.slip: no such dataset file"
    (tmp_path / "junk.slip").write_bytes(b"\0" * 300)
    junk = run("info", "junk.slip", cwd=tmp_path)
    assert junk.returncode == 1 and "junk.slip: not a slipstream dataset" in junk.stderr
    no_folder = run("write", "nowhere", "x.slip", cwd=tmp_path)
    assert no_folder.returncode == 1 and "nowhere is not a folder" in no_folder.stderr
