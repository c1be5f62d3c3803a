"""slipstream against FFCV, the PyTorch DataLoader (+ Pillow, stock and with
``draft()``), DALI, SPDL, LitData and MosaicML streaming on CPU, side by side
on the same machine, the same JPEG bytes and the same pipeline semantics.

Usage::

    python benchmarks/compare.py [FOLDER] [--repeats R] [--epochs E] [--sets ...] [--systems ...] [--scenarios ...]

FOLDER defaults to ``../shared/data/imagenet-sample``.  The comparison runs
on three sets of JPEG bytes made from it (``bytesets.py``): the photos as
they are, FFCV's re-encoding of them, and the photos at a 1024-pixel longer
side.  In each row (a set and a scenario) every system decodes exactly the
same bytes: the set's folder, or its own format's copy of the folder's bytes
unchanged, which ``bytesets.verify_set`` checks before anything is timed
(the run stops when a copy differs).  slipstream's tiled file (the same
JPEGs re-coded losslessly into restart-marker tiles: the same pixels,
checked) is a row of its own beside slipstream's byte-for-byte row, and so
is its planes file (each JPEG decoded once to its YCbCr 4:2:0 planes,
``write_mode="yuv420"``; the planes checked to be the JPEG's own).  FFCV
is in the rows of the two sets its own writer made, and in the raw-bytes
row, whose ``BytesField`` holds the files unchanged.

The runners that have a check mode (RUNNERS.md, "Check") first run each row
once with it: the images counted per epoch must be the folder's number of
images, and the digest of the bytes each decoded must be the folder's own
(``peer_common.folder_digest``), so that every system counts exactly the
images it decodes, from the same JPEG bytes; a failed check stops the run.

Every measurement runs in a fresh process of the system's own virtual
environment (``benchmarks/.venvs/``, made by ``make bench-peers``) through
its runner (``benchmarks/peers/*_runner.py``, contract in
``benchmarks/peers/RUNNERS.md``): one warm-up epoch, then ``--epochs``
timed epochs that only count the images of each batch, as a training step
receiving them would.  The order of the systems rotates from one repeat to
the next so that machine drift hits all alike; the report gives the median
over repeats of each run's median epoch, with the range.

The ``recipe`` scenario is torchvision's reference training recipe
(RandomResizedCrop 176, flip, TrivialAugmentWide, Normalize, RandomErasing
0.1, each batch mixed by MixUp 0.2 or CutMix 1.0 into soft labels): DALI
with its own ``trivial_augment_wide``, the DataLoader and SPDL with the
policy done in Pillow the way torchvision's PIL path does it
(``peers/pillow_augment.py``, ``peers/recipe_torch.py``); the systems with
no policy report it unsupported.

Writes ``benchmarks/results/<date>.json``, then regenerates
``BENCHMARKS.md`` and ``benchmarks/results/<date>.png`` from it
(``--report-only JSON`` regenerates them from an earlier run).  A run of
part of the plan (fewer sets, scenarios or systems) is merged into the
newest whole comparison measured on the same machine: its figures replace
those of the same systems in the same rows, and the report names the run
each figure comes from.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import bytesets
from bytesets import PEERS, REPO, VENVS

DEFAULT_FOLDER = REPO.parent / "shared" / "data" / "imagenet-sample"
SCENARIOS = ["raw", "train", "val", "simclr", "multicrop", "recipe"]
# The scenarios of each byte set: every scenario on the photos as they are;
# the two single-view ones on the others, where the bytes, not the pipeline, change.
PLAN = {"original": SCENARIOS, "reencoded": ["train", "val"], "1024": ["train", "val"]}
RESULTS = REPO / "benchmarks" / "results"
# Time to first batch and the scaling table: the set every system reads.
REFERENCE_SET = "reencoded"
BATCH = 128


def systems() -> dict[str, dict[str, Any]]:
    """Every system: interpreter, runner, the kind of copy of a byte set it
    reads (``bytesets.RELATION``), extra SPEC.json keys, whether its runner
    has a check mode, and whether it is a variant of another system that
    differs only in how it decodes."""
    main = sys.executable
    return {
        "slipstream": {"python": main, "runner": PEERS / "slipstream_runner.py", "reads": "tiled",
                       "decoding_variant": True},
        "slipstream (byte for byte)": {"python": main, "runner": PEERS / "slipstream_runner.py", "reads": "slip"},
        "slipstream (yuv420)": {"python": main, "runner": PEERS / "slipstream_runner.py", "reads": "planes",
                                "decoding_variant": True},
        "slipstream (.beton)": {"python": main, "runner": PEERS / "slipstream_runner.py", "reads": "beton"},
        "ffcv": {"python": VENVS / "ffcv" / "bin" / "python", "runner": PEERS / "ffcv_runner.py", "reads": "beton"},
        "dataloader": {"python": VENVS / "dataloader" / "bin" / "python", "runner": PEERS / "dataloader_runner.py",
                       "reads": "folder", "check": True},
        "dataloader (draft)": {"python": VENVS / "dataloader" / "bin" / "python",
                               "runner": PEERS / "dataloader_runner.py", "reads": "folder", "check": True,
                               "spec": {"draft": True}, "decoding_variant": True},
        "dali": {"python": VENVS / "dali" / "bin" / "python", "runner": PEERS / "dali_runner.py", "reads": "folder",
                 "check": True},
        "spdl": {"python": VENVS / "spdl" / "bin" / "python", "runner": PEERS / "spdl_runner.py", "reads": "folder",
                 "check": True},
        "litdata": {"python": VENVS / "litdata" / "bin" / "python", "runner": PEERS / "litdata_runner.py",
                    "reads": "litdata", "writer": PEERS / "litdata_write.py", "check": True},
        "mosaic": {"python": VENVS / "mosaic" / "bin" / "python", "runner": PEERS / "mosaic_runner.py",
                   "reads": "mds", "writer": PEERS / "mosaic_write.py", "check": True},
    }


# slipstream reading FFCV's file directly is a feature, not a separate system to compare.
DEFAULT_SYSTEMS = [name for name in systems() if name != "slipstream (.beton)"]


# What the report says of a peer beyond its settings: where it departs from its
# own documented fast path, and why.
NOTES = {
    "litdata": "decodes with Pillow (the DataLoader peer's decode) from the bytes it stores: its JPEG serializer "
               "decodes with torchvision, whose PyPI wheel for torch 2.13.0 is CUDA-built and does not load with "
               "the CPU torch.",
    "mosaic": "`import streaming` runs with an empty stand-in for `streaming.vision` (its ready-made vision "
              "datasets, which need torchvision: see litdata); the runner uses `streaming.base` only.",
    "spdl": "crops happen in FFmpeg's filter graph on the YUV frame, whose crop offsets round down to the "
            "chroma subsampling (at most 1 pixel on 4:2:0 JPEGs); normalisation is torch on the uint8 batch.",
    "ffcv": "its writer re-encodes every photo (OpenCV, quality 90) and cannot store a file's JPEG bytes "
            "unchanged in an image field, so it has no row on the photos as they are, except raw bytes "
            "(a BytesField of the files).",
}


def available(system: dict[str, Any]) -> str | None:
    """None when the system can run, else why not."""
    if not Path(system["python"]).exists():
        return f"no virtual environment at {Path(system['python']).parent.parent} (run `make bench-peers`)"
    if not Path(system["runner"]).exists():
        return f"no runner {Path(system['runner']).name}"
    return None


def copy_kind(system: dict[str, Any], scenario: str) -> str | None:
    """The kind of copy (``bytesets.RELATION``) ``system`` reads in ``scenario``:
    for raw bytes, the files' bytes as a byte string where its own image
    format would hand over pixels; None where the system has no such row
    (a variant that only decodes differently is its base system's twin
    when nothing is decoded)."""
    kind = system["reads"]
    if scenario != "raw":
        return kind
    if system.get("decoding_variant"):
        return None
    return {"slip": "bytes-slip", "beton": "bytes-beton"}.get(kind, kind)


def prepare_data(folder: Path, sets: list[str], chosen: dict[str, dict[str, Any]],
                 scenarios: list[str]) -> dict[str, dict[str, Path]]:
    """Every copy of every byte set the chosen systems read in ``scenarios``
    (``bytesets.prepare``)."""
    writers = {s["reads"]: (Path(s["python"]), s["writer"]) for s in chosen.values()
               if "writer" in s and not available(s)}
    return {byte_set: bytesets.prepare(folder, byte_set, writers,
                                       {copy_kind(s, scenario) for s in chosen.values()
                                        for scenario in PLAN[byte_set] if scenario in scenarios})
            for byte_set in sets}


def describe_set(byte_set: str, paths: dict[str, Path]) -> dict[str, Any]:
    """The set's folder, image count, mean size and bytes per image."""
    import numpy as np
    import slipstream as ss
    from peer_common import find_samples

    samples = find_samples(paths["folder"])
    files = [path for path, _ in samples]
    sizes = []
    for path in files:
        info = ss.native.jpeg_info(path.read_bytes())
        sizes.append((info.width, info.height))
    pixels = np.array([w * h for w, h in sizes], dtype=np.float64)
    return {"description": bytesets.SETS[byte_set], "folder": str(paths["folder"]), "images": len(files),
            "classes": len({label for _, label in samples}),
            "mean_megapixels": float(pixels.mean() / 1e6),
            "median_size": [int(np.median([w for w, _ in sizes])), int(np.median([h for _, h in sizes]))],
            "mean_bytes": float(np.mean([path.stat().st_size for path in files])), "reads": {}}


def run(system: dict[str, Any], spec: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any]:
    """One runner process; its JSON result (or the error)."""
    with tempfile.TemporaryDirectory(prefix="bench-spec-") as folder:
        spec_file = Path(folder) / "spec.json"
        spec_file.write_text(json.dumps(dict(spec, start_monotonic=time.monotonic())))
        proc = subprocess.run([str(system["python"]), str(system["runner"]), "--spec", str(spec_file)],
                              capture_output=True, text=True, env={**os.environ, **(env or {})}, cwd=REPO,
                              timeout=1800)
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout)[-2000:]}
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": f"no JSON result: {proc.stdout[-500:]} {proc.stderr[-1500:]}"}


def import_torch_s(system: dict[str, Any]) -> float | None:
    """Seconds from starting the system's interpreter to having imported
    torch (the same clock as ``first_batch_s``); None without torch."""
    start = time.monotonic()
    proc = subprocess.run([str(system["python"]), "-c", "import time, torch; print(time.monotonic())"],
                          capture_output=True, text=True, cwd=REPO)
    return float(proc.stdout.strip()) - start if proc.returncode == 0 else None


def measure(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    chosen = {name: s for name, s in systems().items() if name in args.systems}
    skipped = {name: why for name, s in chosen.items() if (why := available(s))}
    runnable = {name: s for name, s in chosen.items() if name not in skipped}
    data = prepare_data(folder, args.sets, runnable, args.scenarios)
    threads = os.cpu_count() or 1
    results: dict[str, Any] = {"sets": {}, "throughput": {}, "first_batch": {}, "scaling": {}, "scaling_runs": {},
                               "skipped": skipped, "errors": [], "settings": {}, "versions": {}, "threads": threads,
                               "notes": {name: NOTES[name] for name in runnable if name in NOTES}}

    def row(byte_set: str, scenario: str) -> list[str]:
        """The systems that have a copy of ``byte_set`` for ``scenario``."""
        return [name for name, s in runnable.items() if (kind := copy_kind(s, scenario)) and kind in data[byte_set]]

    def spec(byte_set: str, name: str, scenario: str, **extra: Any) -> dict[str, Any]:
        system = runnable[name]
        # The recipe's soft labels have one entry per class of the set's folder, for every system alike.
        classes = {"num_classes": results["sets"][byte_set]["classes"]} if scenario == "recipe" else {}
        return {"scenario": scenario, "data": str(data[byte_set][copy_kind(system, scenario)]),
                "batch_size": BATCH, "threads": threads, "epochs": args.epochs, "warmup_epochs": 1,
                **classes, **system.get("spec", {}), **extra}

    rows = [(byte_set, scenario) for byte_set in args.sets for scenario in PLAN[byte_set]
            if scenario in args.scenarios]
    for byte_set in args.sets:
        results["sets"][byte_set] = describe_set(byte_set, data[byte_set])
    for byte_set in args.sets:  # the same bytes in every row, before anything is timed
        reads = {scenario: {name: copy_kind(runnable[name], scenario) for name in row(byte_set, scenario)}
                 for bs, scenario in rows if bs == byte_set}
        results["sets"][byte_set]["reads"] = bytesets.verify_set(byte_set, data[byte_set], reads)
    results["check"] = check_systems(args, data, runnable, rows, row, spec)
    for repeat in range(args.repeats):
        for byte_set, scenario in rows:
            names = row(byte_set, scenario)
            order = names[repeat % len(names):] + names[:repeat % len(names)]  # rotate: drift hits all
            for name in order:
                out = run(runnable[name], spec(byte_set, name, scenario))
                print(f"  repeat {repeat + 1}, {byte_set}, {scenario}, {name}: {_summary(out)}", flush=True)
                _record(results, results["throughput"].setdefault(byte_set, {}).setdefault(scenario, {}),
                        name, f"{byte_set}/{scenario}", out)
    reference = REFERENCE_SET if REFERENCE_SET in args.sets else args.sets[0]
    results["reference_set"] = reference
    if "train" in args.scenarios:
        for name in row(reference, "train"):  # time to first batch: a cold compile cache, then warm
            with tempfile.TemporaryDirectory(prefix="bench-cache-") as cache:
                env = {"SLIPSTREAM_CACHE_DIR": cache}
                runs = [run(runnable[name], spec(reference, name, "train", first_batch_only=True), env)
                        for _ in range(4)]
            times = [r.get("first_batch_s") for r in runs]
            floor = [import_torch_s(runnable[name]) for _ in range(3)]
            results["first_batch"][name] = {"cold_s": times[0], "warm_s": times[1:], "import_torch_s": floor}
            print(f"  first batch, {name}: cold {times[0]}, warm {times[1:]}, import torch alone {floor}", flush=True)
        for name in row(reference, "train"):  # scaling: 1 thread against all, back to back: drift cancels in each ratio
            pairs = []
            for _ in range(args.repeats):
                one = run(runnable[name], spec(reference, name, "train", threads=1))
                every = run(runnable[name], spec(reference, name, "train"))
                _record(results, results["scaling_runs"], name, f"{reference}/train, 1 thread", one)
                if "epoch_images_per_s" in one and "epoch_images_per_s" in every:
                    pairs.append((statistics.median(one["epoch_images_per_s"]),
                                  statistics.median(every["epoch_images_per_s"])))
            if pairs:
                results["scaling"][name] = {"threads": threads, "one": [a for a, _ in pairs],
                                            "all": [b for _, b in pairs], "ratios": [b / a for a, b in pairs]}
                print(f"  scaling, {name}: {[round(b / a, 2) for a, b in pairs]}", flush=True)
        if threads > 1:
            from ceiling import measure as ceiling

            results["scaling_ceiling"] = ceiling(data[reference]["folder"])
            print(f"  scaling ceiling (independent decoding processes): {results['scaling_ceiling']['ratio']:.2f}x",
                  flush=True)
    return results


def check_systems(args: argparse.Namespace, data: dict[str, dict[str, Path]], runnable: dict[str, dict[str, Any]],
                  rows: list[tuple[str, str]], row: Any, spec: Any) -> dict[str, Any]:
    """Each row once in check mode (RUNNERS.md, "Check") for the systems
    that have it: ``ok`` when every epoch counted the set's images and
    decoded exactly the set's bytes.  Stops the run, naming every failure,
    when one is not."""
    from peer_common import folder_digest  # noqa: E402  (benchmarks/peers)

    checks: dict[str, Any] = {}
    failures = []
    for byte_set, scenario in rows:
        expected = checks.setdefault(byte_set, {"expected": folder_digest(data[byte_set]["folder"])})["expected"]
        for name in row(byte_set, scenario):
            if not runnable[name].get("check"):
                continue
            out = run(runnable[name], spec(byte_set, name, scenario, check=True, check_epochs=args.check_epochs))
            if "check" not in out:
                verdict = {"ok": False, "error": out.get("error") or out.get("unsupported") or "no check result"}
            else:
                got = out["check"]
                verdict = {"ok": all(n == expected["images"] for n in got["epoch_images"])
                           and all(d == expected["bytes_digest"] for d in got["epoch_bytes_digests"]),
                           "epoch_images": got["epoch_images"],
                           "epoch_distinct_images": got["epoch_distinct_images"],
                           "bytes_digest_matches": [d == expected["bytes_digest"]
                                                    for d in got["epoch_bytes_digests"]],
                           "output_shapes": got.get("output_shapes")}
            checks[byte_set].setdefault(name, {})[scenario] = verdict
            print(f"  check, {byte_set}, {scenario}, {name}: {'ok' if verdict['ok'] else 'FAILED'} "
                  f"{verdict.get('epoch_images', verdict.get('error', ''))}", flush=True)
            if not verdict["ok"]:
                failures.append(f"{name} on {byte_set}/{scenario}: {verdict.get('epoch_images', '')} "
                                f"{verdict.get('bytes_digest_matches', verdict.get('error', ''))}")
    if failures:
        raise bytesets.DifferentBytes("check mode failed (not every image once, from the set's bytes):\n  "
                                      + "\n  ".join(failures))
    return checks


def _summary(out: dict[str, Any]) -> str:
    if "error" in out:
        return "ERROR " + out["error"].strip().splitlines()[-1][:200]
    if "unsupported" in out:
        return f"unsupported: {out['unsupported']}"
    return f"{statistics.median(out['epoch_images_per_s']):,.0f} images/s"


def _record(results: dict[str, Any], by_system: dict[str, Any], name: str, where: str, out: dict[str, Any]) -> None:
    """One run's figures into ``by_system[name]`` (errors into ``results``)."""
    entry = by_system.setdefault(name, {"images_per_s": [], "cpu_s": [], "rss_mb": []})
    if "error" in out:
        results["errors"].append({"system": name, "row": where, "error": out["error"]})
        return
    if "unsupported" in out:
        entry["unsupported"] = out["unsupported"]
        return
    entry["images_per_s"].append(statistics.median(out["epoch_images_per_s"]))
    entry["cpu_s"].append(out["cpu_seconds_per_image"])
    entry["rss_mb"].append(out["peak_rss_mb"])
    if "1 thread" not in where:  # the main runs' settings (not the one-thread runs of the scaling table)
        settings = {key: value for key, value in out.get("settings", {}).items() if key != "data"}
        results["settings"].setdefault(name, {})[where] = settings
    results["versions"][name] = out.get("version")


def is_whole(args: argparse.Namespace) -> bool:
    """Whether the run measures the whole plan: every set, scenario and system."""
    return (set(args.sets) == set(PLAN) and set(args.scenarios) == set(SCENARIOS)
            and set(DEFAULT_SYSTEMS) <= set(args.systems))


def newest_whole_report(same_machine: dict[str, Any]) -> tuple[Path, dict[str, Any]] | None:
    """The newest ``results/<date>.json`` of a whole comparison on a machine
    like ``same_machine`` (CPU model and cores), with its path; None without
    one.  Of a whole run and its copies with rows merged in, the copy with
    the latest rows."""
    found = []
    for path in RESULTS.glob("20[0-9][0-9]-[0-9][0-9]-[0-9][0-9].json"):
        report = json.loads(path.read_text())
        mine = {key: report.get("machine", {}).get(key) for key in ("cpu", "cores")}
        if mine == {key: same_machine.get(key) for key in ("cpu", "cores")}:
            merged = max((run["timestamp"] for run in report["results"].get("merged", [])), default="")
            found.append(((report.get("timestamp", ""), merged), path, report))
    if not found:
        return None
    _, path, report = max(found, key=lambda entry: entry[0])
    return path, report


def merge_rows(whole: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """``whole`` with the figures ``part`` measured in place of its own, system
    by system within each row: their figures, checks, settings, versions,
    notes, files read and errors; the systems of a row that ``part`` did not
    run keep ``whole``'s figures.  The run they came from is listed under
    ``results["merged"]``, with its rows and systems, for the report to name."""
    merged = json.loads(json.dumps(whole))
    results, new = merged["results"], part["results"]
    rows, systems = [], set()
    for byte_set, by_scenario in new["throughput"].items():
        for scenario, by_system in by_scenario.items():
            results["throughput"].setdefault(byte_set, {}).setdefault(scenario, {}).update(by_system)
            rows.append(f"{byte_set}/{scenario}")
            systems.update(by_system)
            for name, verdict in new.get("check", {}).get(byte_set, {}).items():
                if name != "expected" and scenario in verdict:
                    results.setdefault("check", {}).setdefault(byte_set, {}).setdefault(name, {})[scenario] = \
                        verdict[scenario]
            results["errors"] = [e for e in results.get("errors", [])
                                 if e["row"] != f"{byte_set}/{scenario}" or e["system"] not in by_system]
    for name, by_row in new.get("settings", {}).items():
        earlier = results.setdefault("settings", {}).setdefault(name, {})
        if not all(isinstance(settings, dict) for settings in earlier.values()):
            # results of 2026-11-25 and before hold one row's settings, not settings by row
            earlier = results["settings"][name] = {"the other rows": {key: value for key, value in earlier.items()
                                                                      if key != "data"}}
        earlier.update(by_row)
    results.setdefault("versions", {}).update(new.get("versions", {}))
    results.setdefault("notes", {}).update(new.get("notes", {}))
    results["errors"] = results.get("errors", []) + new.get("errors", [])
    for byte_set, described in new["sets"].items():
        kept = results["sets"].setdefault(byte_set, described)
        kept["classes"] = described["classes"]
        for scenario, reads in described.get("reads", {}).items():
            kept.setdefault("reads", {}).setdefault(scenario, {}).update(reads)

    def superseded(run: dict[str, Any], row: str) -> bool:
        byte_set, scenario = row.split("/")
        # Runs of 2026-11-26 and before name no systems: they ran every system of their rows.
        theirs = set(run.get("systems") or results["throughput"][byte_set][scenario])
        return row in rows and theirs <= systems

    earlier = [dict(run, rows=[r for r in run["rows"] if not superseded(run, r)])
               for run in results.get("merged", [])]
    results["merged"] = [run for run in earlier if run["rows"]]
    results["merged"].append(
        {"rows": rows, "systems": sorted(systems), "timestamp": part["timestamp"], "command": part["command"],
         "repeats": part["repeats"], "epochs": part["epochs"], "slipstream": part["slipstream"],
         "libslipstream": part["libslipstream"]})
    return merged


def machine() -> dict[str, Any]:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cpu": model, "cores": os.cpu_count(), "memory_gib": round(memory, 1), "platform": platform.platform(),
            "python": platform.python_version()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER)
    parser.add_argument("--repeats", type=int, default=3, help="runs per system and scenario (default 3)")
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs per run (default 2)")
    parser.add_argument("--sets", nargs="*", default=list(PLAN), choices=list(PLAN),
                        help="byte sets (default: all; see bytesets.py)")
    parser.add_argument("--systems", nargs="*", default=DEFAULT_SYSTEMS, choices=list(systems()))
    parser.add_argument("--scenarios", nargs="*", default=SCENARIOS, choices=SCENARIOS,
                        help="scenarios, each run on the sets whose plan has it (PLAN)")
    parser.add_argument("--check-epochs", type=int, default=1,
                        help="epochs of each check-mode run (RUNNERS.md, 'Check'; default 1)")
    parser.add_argument("--report-only", type=Path, default=None, help="regenerate the report from this JSON")
    args = parser.parse_args(argv)
    from common import write_json  # noqa: E402  (benchmarks/, next to this file)
    from report import write_report  # noqa: E402

    if args.report_only:
        write_report(json.loads(args.report_only.read_text()), args.report_only)
        return 0
    started = datetime.now().astimezone()
    results = measure(args, args.folder)
    import slipstream as ss

    report = {"results": results, "machine": machine(), "folder": str(args.folder), "batch_size": BATCH,
              "repeats": args.repeats, "epochs": args.epochs, "slipstream": ss.__version__,
              "libslipstream": ss.native.version(), "command": shlex.join([sys.executable, *sys.argv]),
              "timestamp": started.isoformat(timespec="seconds")}
    out = RESULTS / f"{started.date().isoformat()}.json"
    if not is_whole(args):
        whole = newest_whole_report(report["machine"])
        if whole is None:
            out = out.with_name(f"{out.stem}-{'-'.join(args.scenarios)}.json")
            print(f"no whole comparison from this machine in {RESULTS} to merge these rows into; the report shows "
                  "only them")
        else:
            print(f"merging the rows of this run into {whole[0].name}, the newest whole comparison on this machine")
            report = merge_rows(whole[1], report)
    write_json(out, report)
    print(f"wrote {out}")
    write_report(report, out)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(1, str(PEERS))
    sys.exit(main(sys.argv[1:]))
