"""slipstream against FFCV, the PyTorch DataLoader (+ Pillow), DALI, SPDL,
LitData and MosaicML streaming on CPU, side by side on the same machine, data
and pipeline semantics.

Usage::

    python benchmarks/compare.py [FOLDER] [--repeats R] [--epochs E] [--systems ...] [--scenarios ...]

FOLDER defaults to ``../shared/data/imagenet-sample``.  Its JPEGs are written
once with FFCV's own writer into a ``.beton`` (FFCV re-encodes them), which
FFCV and slipstream (through its FFCV reader) then both read: identical
bytes.  slipstream's own files are copies of that ``.beton`` made by
``slipstream convert``: "slipstream" with ``--tile-width 32`` (the same
JPEGs re-coded losslessly into restart-marker tiles: identical pixels) and
"slipstream (byte for byte)" without.  The DataLoader, DALI and SPDL read
the original folder; LitData and MosaicML streaming read their own formats,
written once from the folder by their own writers (``litdata.optimize``,
``MDSWriter``) with each file's bytes unchanged.

The runners that have a check mode (RUNNERS.md, "Check") first run each
scenario once with it: the images counted per epoch must be the folder's
number of images, and the digest of the bytes each decoded must be the
folder's own (``peer_common.folder_digest``), so that every system counts
exactly the images it decodes, from the same JPEG bytes.

Every measurement runs in a fresh process of the system's own virtual
environment (``benchmarks/.venvs/``, made by ``make bench-peers``) through
its runner (``benchmarks/peers/*_runner.py``, contract in
``benchmarks/peers/RUNNERS.md``): one warm-up epoch, then ``--epochs``
timed epochs that only count the images of each batch, as a training step
receiving them would.  The order of the systems rotates from one repeat to
the next so that machine drift hits all alike; the report gives the median
over repeats of each run's median epoch, with the range.

Writes ``benchmarks/results/<date>.json``, then regenerates
``BENCHMARKS.md`` and ``benchmarks/results/<date>.png`` from it
(``--report-only JSON`` regenerates them from an earlier run).
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

REPO = Path(__file__).resolve().parent.parent
PEERS = REPO / "benchmarks" / "peers"
VENVS = REPO / "benchmarks" / ".venvs"
DATA = REPO / "benchmarks" / ".data"
DEFAULT_FOLDER = REPO.parent / "shared" / "data" / "imagenet-sample"
SCENARIOS = ["raw", "train", "val", "simclr", "multicrop"]
SCENARIO_NAMES = {"raw": "raw bytes (no decode)", "train": "ImageNet train", "val": "ImageNet val",
                  "simclr": "SimCLR, 2 views", "multicrop": "multi-crop 2x224 + 6x96"}
BATCH = 128
TILE_WIDTH = 32  # slipstream's own file: the .beton's JPEGs re-coded losslessly into tiles (RGBImageField.tile_width)


def systems() -> dict[str, dict[str, Any]]:
    """Every system: interpreter, runner and which copy of the data it reads."""
    return {
        "slipstream": {"python": sys.executable, "runner": PEERS / "slipstream_runner.py", "data": "tiled"},
        "slipstream (byte for byte)": {"python": sys.executable, "runner": PEERS / "slipstream_runner.py",
                                       "data": "slip"},
        "slipstream (.beton)": {"python": sys.executable, "runner": PEERS / "slipstream_runner.py", "data": "beton"},
        "ffcv": {"python": VENVS / "ffcv" / "bin" / "python", "runner": PEERS / "ffcv_runner.py", "data": "beton"},
        "dataloader": {"python": VENVS / "dataloader" / "bin" / "python", "runner": PEERS / "dataloader_runner.py",
                       "data": "folder"},
        "dali": {"python": VENVS / "dali" / "bin" / "python", "runner": PEERS / "dali_runner.py", "data": "folder"},
        "spdl": {"python": VENVS / "spdl" / "bin" / "python", "runner": PEERS / "spdl_runner.py", "data": "folder",
                 "check": True},
        "litdata": {"python": VENVS / "litdata" / "bin" / "python", "runner": PEERS / "litdata_runner.py",
                    "data": "litdata", "writer": PEERS / "litdata_write.py", "check": True},
        "mosaic": {"python": VENVS / "mosaic" / "bin" / "python", "runner": PEERS / "mosaic_runner.py",
                   "data": "mds", "writer": PEERS / "mosaic_write.py", "check": True},
    }


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
}


def available(system: dict[str, Any]) -> str | None:
    """None when the system can run, else why not."""
    if not Path(system["python"]).exists():
        return f"no virtual environment at {Path(system['python']).parent.parent} (run `make bench-peers`)"
    if not Path(system["runner"]).exists():
        return f"no runner {Path(system['runner']).name}"
    return None


def prepare_data(folder: Path, names: list[str] | None = None) -> dict[str, Path]:
    """The files every system reads: the .beton written by FFCV from
    ``folder`` and slipstream's copy of it, and for the raw-bytes scenario a
    .beton whose image field is a BytesField of the files' bytes (FFCV has no
    way to hand over an RGBImageField's bytes) and slipstream's copy of that;
    and for each system of ``names`` (default: all) with a writer of its
    own and an environment, its own copy of the folder's bytes, which serves
    the raw-bytes scenario too."""
    import slipstream as ss

    DATA.mkdir(parents=True, exist_ok=True)
    ffcv_python = VENVS / "ffcv" / "bin" / "python"
    paths: dict[str, Path] = {"folder": folder}
    for key, flags in (("", []), ("bytes-", ["--bytes"])):
        beton = DATA / f"{folder.name}{'-bytes' if flags else ''}.beton"
        slip = beton.with_suffix(".slip")
        if not beton.exists():
            if not ffcv_python.exists():
                raise SystemExit("FFCV's environment is missing: run `make bench-peers` first")
            print(f"writing {beton} with FFCV's writer", flush=True)
            subprocess.run([str(ffcv_python), str(PEERS / "ffcv_write.py"), str(folder), str(beton), *flags],
                           check=True)
        if not slip.exists():
            ss.convert(beton, slip, verbose=False)
        paths[f"{key}beton"], paths[f"{key}slip"] = beton, slip
    tiled = DATA / f"{folder.name}-tiles{TILE_WIDTH}.slip"
    if not tiled.exists():
        ss.convert(paths["beton"], tiled, tile_width=TILE_WIDTH, verbose=False)
    # Raw bytes are not decoded: tiles change nothing there.
    paths["tiled"], paths["bytes-tiled"] = tiled, paths["bytes-slip"]
    for name, system in systems().items():
        if "writer" not in system or (names is not None and name not in names) or available(system):
            continue
        copy = DATA / f"{folder.name}.{system['data']}"
        if not copy.exists():
            print(f"writing {copy} with {name}'s writer", flush=True)
            subprocess.run([str(system["python"]), str(system["writer"]), str(folder), str(copy)], check=True,
                           cwd=REPO)
        paths[system["data"]] = paths[f"bytes-{system['data']}"] = copy
    return paths


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


def measure(args: argparse.Namespace, data: dict[str, Path]) -> dict[str, Any]:
    chosen = {name: s for name, s in systems().items() if name in args.systems}
    skipped = {name: why for name, s in chosen.items() if (why := available(s))}
    runnable = [name for name in chosen if name not in skipped]
    threads = os.cpu_count() or 1
    results: dict[str, Any] = {"throughput": {}, "first_batch": {}, "scaling": {}, "skipped": skipped,
                               "errors": [], "settings": {}, "versions": {},
                               "notes": {name: NOTES[name] for name in runnable if name in NOTES}}

    def spec(name: str, scenario: str, **extra: Any) -> dict[str, Any]:
        copy = chosen[name]["data"]
        if scenario == "raw" and copy != "folder":
            copy = f"bytes-{copy}"
        return {"scenario": scenario, "data": str(data[copy]), "batch_size": BATCH,
                "threads": threads, "epochs": args.epochs, "warmup_epochs": 1, **extra}

    if any(chosen[name].get("check") for name in runnable):
        results["check"] = check_systems(args, data, {name: chosen[name] for name in runnable}, spec)
    for repeat in range(args.repeats):
        order = runnable[repeat % len(runnable):] + runnable[:repeat % len(runnable)]  # rotate: drift hits all
        for scenario in args.scenarios:
            for name in order:
                out = run(chosen[name], spec(name, scenario))
                print(f"  repeat {repeat + 1}, {scenario}, {name}: "
                      f"{_summary(out)}", flush=True)
                _record(results, name, scenario, out)
    if "train" in args.scenarios:
        for name in runnable:  # time to first batch: a cold compile cache, then warm
            with tempfile.TemporaryDirectory(prefix="bench-cache-") as cache:
                env = {"SLIPSTREAM_CACHE_DIR": cache}
                runs = [run(chosen[name], spec(name, "train", first_batch_only=True), env) for _ in range(4)]
            times = [r.get("first_batch_s") for r in runs]
            floor = [import_torch_s(chosen[name]) for _ in range(3)]
            results["first_batch"][name] = {"cold_s": times[0], "warm_s": times[1:], "import_torch_s": floor}
            print(f"  first batch, {name}: cold {times[0]}, warm {times[1:]}, import torch alone {floor}", flush=True)
        for name in runnable:  # scaling: 1 thread against all, back to back so that drift cancels in each ratio
            pairs = []
            for _ in range(args.repeats):
                one = run(chosen[name], spec(name, "train", threads=1))
                every = run(chosen[name], spec(name, "train"))
                _record(results, name, "train/1 thread", one)
                if "epoch_images_per_s" in one and "epoch_images_per_s" in every:
                    pairs.append((statistics.median(one["epoch_images_per_s"]),
                                  statistics.median(every["epoch_images_per_s"])))
            if pairs:
                results["scaling"][name] = {"threads": threads, "one": [a for a, _ in pairs],
                                            "all": [b for _, b in pairs], "ratios": [b / a for a, b in pairs]}
                print(f"  scaling, {name}: {[round(b / a, 2) for a, b in pairs]}", flush=True)
    if "train" in args.scenarios and threads > 1:
        from ceiling import measure as ceiling

        results["scaling_ceiling"] = ceiling(data["folder"])
        print(f"  scaling ceiling (independent decoding processes): {results['scaling_ceiling']['ratio']:.2f}x",
              flush=True)
    return results


def check_systems(args: argparse.Namespace, data: dict[str, Path], chosen: dict[str, dict[str, Any]],
                  spec: Any) -> dict[str, Any]:
    """Each scenario once in check mode (RUNNERS.md, "Check") for the systems
    that have it: ``ok`` when every epoch counted the folder's images and
    decoded exactly the folder's bytes."""
    from peer_common import folder_digest  # noqa: E402  (benchmarks/peers)

    expected = folder_digest(data["folder"])
    checks: dict[str, Any] = {"expected": expected}
    for name, system in chosen.items():
        if not system.get("check"):
            continue
        for scenario in args.scenarios:
            out = run(system, spec(name, scenario, check=True, check_epochs=args.check_epochs))
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
            checks.setdefault(name, {})[scenario] = verdict
            print(f"  check, {scenario}, {name}: {'ok' if verdict['ok'] else 'FAILED'} "
                  f"{verdict.get('epoch_images', verdict.get('error', ''))}", flush=True)
    return checks


def _summary(out: dict[str, Any]) -> str:
    if "error" in out:
        return "ERROR " + out["error"].strip().splitlines()[-1][:200]
    if "unsupported" in out:
        return f"unsupported: {out['unsupported']}"
    return f"{statistics.median(out['epoch_images_per_s']):,.0f} images/s"


def _record(results: dict[str, Any], name: str, scenario: str, out: dict[str, Any]) -> None:
    entry = results["throughput"].setdefault(scenario, {}).setdefault(name, {"images_per_s": [], "cpu_s": [],
                                                                             "rss_mb": []})
    if "error" in out:
        results["errors"].append({"system": name, "scenario": scenario, "error": out["error"]})
        return
    if "unsupported" in out:
        entry["unsupported"] = out["unsupported"]
        return
    entry["images_per_s"].append(statistics.median(out["epoch_images_per_s"]))
    entry["cpu_s"].append(out["cpu_seconds_per_image"])
    entry["rss_mb"].append(out["peak_rss_mb"])
    if "/" not in scenario:  # the main runs' settings (not the one-thread runs of the scaling table)
        results["settings"][name] = out.get("settings", {})
    results["versions"][name] = out.get("version")


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
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs per run (default 3)")
    parser.add_argument("--systems", nargs="*", default=list(systems()))
    parser.add_argument("--scenarios", nargs="*", default=SCENARIOS)
    parser.add_argument("--check-epochs", type=int, default=1,
                        help="epochs of each check-mode run (RUNNERS.md, 'Check'; default 1)")
    parser.add_argument("--report-only", type=Path, default=None, help="regenerate the report from this JSON")
    args = parser.parse_args(argv)
    from common import write_json  # noqa: E402  (benchmarks/, next to this file)
    from report import write_report  # noqa: E402

    if args.report_only:
        write_report(json.loads(args.report_only.read_text()), args.report_only)
        return 0
    data = prepare_data(args.folder, args.systems)
    started = datetime.now().astimezone()
    results = measure(args, data)
    import slipstream as ss

    report = {"results": results, "machine": machine(), "folder": str(args.folder), "batch_size": BATCH,
              "repeats": args.repeats, "epochs": args.epochs, "slipstream": ss.__version__,
              "libslipstream": ss.native.version(), "command": shlex.join([sys.executable, *sys.argv]),
              "timestamp": started.isoformat(timespec="seconds")}
    out = REPO / "benchmarks" / "results" / f"{started.date().isoformat()}.json"
    write_json(out, report)
    print(f"wrote {out}")
    write_report(report, out)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(1, str(PEERS))
    sys.exit(main(sys.argv[1:]))
