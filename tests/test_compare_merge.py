"""A run of part of the comparison (``compare.py --scenarios recipe``) goes
into the newest whole comparison of the same machine: its rows replace
those rows, the rest stay, and the report names the run each row is from."""

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
