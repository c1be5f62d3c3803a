"""A run of part of the comparison (``compare.py --scenarios recipe``, or
``--systems`` some of them) goes into the newest whole comparison of the
same machine: its figures replace those of the same systems in the same
rows, the rest stay, and the report names the run each figure is from.
Regenerating BENCHMARKS.md keeps the sections other benchmarks wrote."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS / "peers"))
sys.path.insert(0, str(BENCHMARKS))

import compare  # noqa: E402
import report  # noqa: E402

MACHINE = {"cpu": "Test CPU", "cores": 2}


def entry(rate: float) -> dict:
    return {"images_per_s": [rate], "cpu_s": [0.001], "rss_mb": [100.0]}


def whole(timestamp: str) -> dict:
    return {"timestamp": timestamp, "machine": MACHINE, "command": "compare.py", "repeats": 3, "epochs": 2,
            "slipstream": "0.1.0", "libslipstream": "0.1.0",
            "results": {"sets": {"original": {"classes": 10}},
                        "throughput": {"original": {"train": {"dali": entry(500.0)}, "recipe": {"dali": entry(1.0)}}},
                        "check": {"original": {"expected": {}, "dali": {"train": {"ok": True}}}},
                        "settings": {"dali": {"device_id": None, "data": "/old/folder"}},
                        "versions": {"dali": "2.3"}, "errors": [{"system": "dali", "row": "original/recipe",
                                                                 "error": "old failure"}]}}


def part(timestamp: str, rate: float) -> dict:
    return {"timestamp": timestamp, "machine": MACHINE, "command": "compare.py --scenarios recipe", "repeats": 3,
            "epochs": 2, "slipstream": "0.1.0", "libslipstream": "0.1.0",
            "results": {"sets": {"original": {"classes": 10}},
                        "throughput": {"original": {"recipe": {"dali": entry(rate)}}},
                        "check": {"original": {"expected": {}, "dali": {"recipe": {"ok": True}}}},
                        "settings": {"dali": {"original/recipe": {"device_id": None, "recipe": "policy"}}},
                        "versions": {"dali": "2.4"}, "errors": []}}


def test_a_partial_run_replaces_its_rows_and_keeps_the_others():
    merged = compare.merge_rows(whole("2026-01-01T00:00:00"), part("2026-01-02T00:00:00", 535.0))
    rows = merged["results"]["throughput"]["original"]
    assert rows["recipe"]["dali"]["images_per_s"] == [535.0] and rows["train"]["dali"]["images_per_s"] == [500.0]
    assert merged["results"]["check"]["original"]["dali"] == {"train": {"ok": True}, "recipe": {"ok": True}}
    assert merged["results"]["errors"] == []  # the replaced row's old failure goes with it
    assert merged["results"]["versions"]["dali"] == "2.4"
    assert merged["results"]["settings"]["dali"] == {"the other rows": {"device_id": None},
                                                     "original/recipe": {"device_id": None, "recipe": "policy"}}
    assert report.row_source(merged["results"], "original", "recipe")[0].startswith(
        "Measured by a later run of this row alone, 2026-01-02T00:00:00")
    assert report.row_source(merged["results"], "original", "train") == []
    again = compare.merge_rows(merged, part("2026-01-03T00:00:00", 540.0))
    assert [run["timestamp"] for run in again["results"]["merged"]] == ["2026-01-03T00:00:00"]


def test_the_newest_whole_run_of_the_same_machine_is_chosen(tmp_path, monkeypatch):
    monkeypatch.setattr(compare, "RESULTS", tmp_path)
    older, newer = whole("2026-01-01T00:00:00"), whole("2026-01-05T00:00:00")
    (tmp_path / "2026-01-01.json").write_text(json.dumps(older))
    (tmp_path / "2026-01-05.json").write_text(json.dumps(newer))
    (tmp_path / "2026-01-09.json").write_text(json.dumps(dict(whole("2026-01-09T00:00:00"),
                                                              machine={"cpu": "Other", "cores": 64})))
    assert compare.newest_whole_report(MACHINE)[0].name == "2026-01-05.json"
    (tmp_path / "2026-01-06.json").write_text(json.dumps(compare.merge_rows(newer, part("2026-01-06T00:00:00", 1.0))))
    assert compare.newest_whole_report(MACHINE)[0].name == "2026-01-06.json"
    assert compare.newest_whole_report({"cpu": "Nowhere", "cores": 1}) is None


def test_a_run_of_some_systems_keeps_the_other_systems_of_its_rows():
    earlier = whole("2026-01-01T00:00:00")
    earlier["results"]["throughput"]["original"]["train"]["slipstream"] = entry(900.0)
    earlier["results"]["errors"].append({"system": "dali", "row": "original/train", "error": "kept"})
    some = part("2026-01-02T00:00:00", 0.0)
    some["results"]["throughput"] = {"original": {"train": {"slipstream": entry(1000.0),
                                                            "slipstream (yuv420)": entry(2500.0)}}}
    some["results"]["sets"]["original"]["reads"] = {"train": {"slipstream (yuv420)": {"file": "p.slip", "holds": "x",
                                                                                      "bytes": 7}}}
    merged = compare.merge_rows(earlier, some)
    row = merged["results"]["throughput"]["original"]["train"]
    assert {name: e["images_per_s"] for name, e in row.items()} == {
        "dali": [500.0], "slipstream": [1000.0], "slipstream (yuv420)": [2500.0]}
    assert {"system": "dali", "row": "original/train", "error": "kept"} in merged["results"]["errors"]
    assert merged["results"]["sets"]["original"]["reads"]["train"]["slipstream (yuv420)"]["bytes"] == 7
    assert report.row_source(merged["results"], "original", "train")[0].startswith(
        "Measured by a later run of this row's slipstream, slipstream (yuv420), 2026-01-02T00:00:00")
    # A later run of the whole row supersedes it; one of fewer systems does not.
    every = part("2026-01-03T00:00:00", 0.0)
    every["results"]["throughput"] = {"original": {"train": {name: entry(1.0) for name in row}}}
    assert [run["timestamp"] for run in compare.merge_rows(merged, every)["results"]["merged"]] == \
        ["2026-01-03T00:00:00"]
    fewer = part("2026-01-03T00:00:00", 0.0)
    fewer["results"]["throughput"] = {"original": {"train": {"slipstream": entry(1.0)}}}
    assert [run["timestamp"] for run in compare.merge_rows(merged, fewer)["results"]["merged"]] == \
        ["2026-01-02T00:00:00", "2026-01-03T00:00:00"]


def test_regenerating_the_page_keeps_the_sections_other_benchmarks_wrote():
    old = "\n".join(["# Benchmarks", "intro", "## Images per second", "old table", "### A row", "old row",
                     "### Written by hand", "kept 1", "## Object storage", "kept 2", "```", "## not a heading",
                     "```", "## Targets", "old targets"])
    new = "\n".join(["# Benchmarks", "new intro", "## Images per second", "new table", "### A row", "new row",
                     "### New row", "added", "## Targets", "new targets"])
    assert report.keep_other_sections(old, new).split("\n") == [
        "# Benchmarks", "new intro", "## Images per second", "new table", "### A row", "new row", "### New row",
        "added", "### Written by hand", "kept 1", "## Object storage", "kept 2", "```", "## not a heading", "```",
        "## Targets", "new targets"]
