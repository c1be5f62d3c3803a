"""``make gpu-check``: everything slipstream does on a GPU machine, checked
and measured in one run of a few minutes.

Usage (on the GPU machine, from a copy of the repository with ``dist/``
from ``make wheel`` and ``build/gpu-wheels`` from ``make gpu-bundle``)::

    make gpu-check                       # or: python3 -P benchmarks/gpu_check.py

On a machine where torch finds no CUDA device it prints one line saying so
and exits 0.  Otherwise, with ``$OUT`` (default ``build/gpu-check``) as its
output folder, it:

1. installs ``dist/slipstream-*.whl`` and the wheels in ``build/gpu-wheels``
   (e.g. ``tbb``, which the machine lacks, and ``scikit-image``, whose
   photos the tests read) into this Python, without their dependencies and
   without the network;
2. records the machine: GPU, driver, CUDA, torch, Numba and its threading
   layer, cores;
3. generates its data (``benchmarks/gpu_data.py``): JPEGs of ImageNet
   sizes, and the sample photos when present (``build/gpu-photos``, carried
   by ``make gpu-bundle``, or ``../shared/data/imagenet-sample``);
4. runs every test marked ``cuda``;
5. runs the training-step benchmark (``benchmarks/training_step.py``):
   ImageNet-train batches on the GPU feeding nothing, a ResNet-50 step and
   the same step on synthetic GPU tensors, for slipstream and the
   DataLoader + Pillow with a worker per core, on the same JPEG bytes;
6. measures the loader's scaling with 1, 2, 4, ... threads up to the
   cores (``benchmarks/scaling.py``), ImageNet train and val, and the
   train pipeline's compiled code called without the loader;
7. measures decoding on the GPU (``DecodeOnDevice``, nvJPEG) against the
   CPU pipeline (``benchmarks/gpu_decode.py``), on the photos and on the
   photos enlarged to four times their pixels, feeding nothing and a
   ResNet-50 step;
8. runs the loader's test suite with its batches on the GPU
   (``SLIPSTREAM_TEST_DEVICE=cuda``).

Each step runs in a process of its own with a time limit drawn from the
whole run's budget (``--budget``, default 480 s), so that one that fails or
hangs is recorded and the others still run.  Written to the output folder:
``gpu-check.json`` (every step's result), ``gpu-check.log`` (everything
printed), and the JUnit XML of each test run.

``--cpu`` runs the same steps that need no GPU (data, the training-step
benchmark with a small model, scaling, the marked tests skipping) on the
CPU with small sizes: the test suite uses it to check this script on
machines without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ElementTree
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
WHEELS = REPO_ROOT / "build" / "gpu-wheels"
BUDGET_S = 480
CUDA_TEST_FILES = ("tests/test_cuda.py", "tests/test_batch_more.py", "tests/test_loader.py", "tests/test_compiler.py")
DEVICE_SUITE_FILES = ("tests/test_loader.py",)


class Log:
    """Everything printed, also written to ``gpu-check.log``."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("w", buffering=1)
        self.lock = threading.Lock()

    def __call__(self, line: str) -> None:
        with self.lock:
            print(line, flush=True)
            self.file.write(line + "\n")

    def close(self) -> None:
        self.file.close()


class Check:
    """The run: its budget, output folder, log and report."""

    def __init__(self, out: Path, work: Path, budget: float, cpu: bool) -> None:
        self.out, self.work, self.cpu = out, work, cpu
        self.deadline = time.monotonic() + budget
        out.mkdir(parents=True, exist_ok=True)
        work.mkdir(parents=True, exist_ok=True)
        self.log = Log(out / "gpu-check.log")
        self.report: dict[str, Any] = {"command": shlex.join([sys.executable, *sys.argv]),
                                       "started": datetime.now().astimezone().isoformat(timespec="seconds"),
                                       "mode": "cpu dry run" if cpu else "cuda", "budget_s": budget, "steps": {}}

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def save(self) -> None:
        path = self.out / "gpu-check.json"
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.report, indent=2) + "\n")
        os.replace(tmp, path)

    def run(self, step: str, argv: list[str], cap: float, env: dict[str, str] | None = None,
            lines: list[str] | None = None) -> dict[str, Any]:
        """Run ``argv`` (a Python script and its arguments, or ``-m`` and a
        module) in this Python, its output streamed to the log (and added to
        ``lines``), for at most ``cap`` seconds and what is left of the
        budget; its outcome.  A module runs with ``-P``: the repository's
        ``slipstream/`` folder must not shadow the installed package."""
        limit = max(1.0, min(cap, self.left()))
        command = [sys.executable, *(["-P"] if argv[0] == "-m" else []), *argv]
        self.log(f"== {step}: {shlex.join(command)} (limit {limit:.0f} s)")
        environment = {"SLIPSTREAM_CACHE_DIR": str(self.work / "cache"), **os.environ, "PYTHONUNBUFFERED": "1",
                       "PYTHONFAULTHANDLER": "1", **(env or {})}
        start = time.monotonic()
        proc = subprocess.Popen(command, cwd=REPO_ROOT, env=environment, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)

        def relay() -> None:
            for line in proc.stdout:
                self.log(f"   {line.rstrip()}")
                if lines is not None:
                    lines.append(line)

        reader = threading.Thread(target=relay)
        reader.start()
        try:
            code = proc.wait(timeout=limit)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            code, timed_out = proc.wait(), True
        reader.join()
        took = time.monotonic() - start
        outcome = {"exit_code": code, "seconds": round(took, 1), "timed_out": timed_out}
        self.log(f"== {step}: " + (f"stopped at its limit of {limit:.0f} s" if timed_out else f"exit {code}")
                 + f" after {took:.0f} s")
        self.report["steps"][step] = outcome
        self.save()
        return outcome


def cuda_line() -> str | None:
    """None when torch sees a CUDA device; else the one line that says why not."""
    try:
        import torch
    except ImportError as exc:
        return f"gpu-check: {sys.executable} cannot import torch ({exc}), so there is no CUDA device to check"
    if not torch.cuda.is_available():
        return (f"gpu-check: no CUDA device here (torch {torch.__version__}: torch.cuda.is_available() is False); "
                f"nothing to check")
    return None


def install(check: Check) -> bool:
    """The wheel from ``dist/`` and the carried wheels, into this Python."""
    wheels = sorted((REPO_ROOT / "dist").glob("slipstream-*.whl"))
    if not wheels:
        check.log("gpu-check: no dist/slipstream-*.whl: run `make gpu-bundle` (or `make wheel`) and carry dist/")
        check.report["steps"]["install"] = {"exit_code": None, "error": "no wheel in dist/"}
        return False
    extra = sorted(WHEELS.glob("*.whl"))
    check.report["wheels"] = [w.name for w in [wheels[-1], *extra]]
    outcome = check.run("install", ["-m", "pip", "install", "--no-deps", "--no-index", "--no-compile",
                                    "--force-reinstall", "--disable-pip-version-check", "-q",
                                    str(wheels[-1]), *map(str, extra)], cap=120)
    return outcome["exit_code"] == 0


def machine(check: Check) -> None:
    """What the machine and this Python are (``benchmarks/machine_info.py``), into the report."""
    lines: list[str] = []
    check.run("machine", [str(HERE / "machine_info.py")], cap=90, lines=lines)
    found = [line for line in lines if line.startswith("{")]
    if found:
        check.report["machine"] = json.loads(found[-1])
        check.save()


def run_tests(check: Check, step: str, files: tuple[str, ...], cap: float, marker: str | None = None,
              device: str | None = None) -> None:
    """One pytest run, its JUnit XML summarized into the report."""
    xml = check.out / f"{step}.xml"
    argv = ["-m", "pytest", "-p", "no:cacheprovider", "-q", f"--junitxml={xml}", "-o", "junit_family=xunit1"]
    if marker:
        argv += ["-m", marker]
    env = {"SLIPSTREAM_TEST_DEVICE": device} if device else None
    outcome = check.run(step, [*argv, *files], cap=cap, env=env)
    if xml.exists():
        outcome.update(junit_summary(xml))
        check.save()


def junit_summary(path: Path) -> dict[str, Any]:
    """Counts and the failing tests (name and first line of the message) of a JUnit XML file."""
    root = ElementTree.parse(path).getroot()
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    failures = []
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        if bad is not None:
            counts["failed"] += 1
            failures.append({"test": name, "message": next(iter((bad.get("message") or "").splitlines()), "")})
        elif case.find("skipped") is not None:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return {**counts, "failures": failures}


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or REPO_ROOT / "build" / "gpu-check"),
                        help="output folder (default: $OUT, else build/gpu-check)")
    parser.add_argument("--work", type=Path, default=REPO_ROOT / "build" / "gpu-check-work",
                        help="where the data and caches go (default: build/gpu-check-work)")
    parser.add_argument("--budget", type=float, default=BUDGET_S, help=f"seconds for the whole run (default: {BUDGET_S})")
    parser.add_argument("--cpu", action="store_true", help="the steps that need no GPU, on the CPU, small")
    parser.add_argument("--no-install", action="store_true", help="use the slipstream this Python has")
    parser.add_argument("--images", type=int, default=None, help="synthetic images (default: 4096; --cpu: 32)")
    parser.add_argument("--photos", type=Path, default=None,
                        help="a folder of JPEG photos (default: build/gpu-photos, else ../shared/data/imagenet-sample)")
    args = parser.parse_args(argv)
    if not args.cpu:
        line = cuda_line()
        if line is not None:
            print(line)
            return 0
    check = Check(args.out, args.work, args.budget, args.cpu)
    try:
        return run_all(check, args)
    finally:
        check.report["finished"] = datetime.now().astimezone().isoformat(timespec="seconds")
        check.save()
        check.log(f"wrote {check.out / 'gpu-check.json'}")
        check.log.close()


def run_all(check: Check, args: argparse.Namespace) -> int:
    cpu = args.cpu
    if not args.no_install and not install(check):
        return 1
    machine(check)
    images = args.images or (32 if cpu else 4096)
    data_json = check.work / "data.json"
    check.run("data", [str(HERE / "gpu_data.py"), "generate", str(check.work / "data"), "--images", str(images),
                       "--json", str(data_json), *(["--photos", str(args.photos)] if args.photos else [])], cap=120)
    data = read_json(data_json) or {}
    check.report["data"] = data
    if not data:
        return 1
    dataset = check.work / "data" / ("photos" if "photos" in data else "synthetic")
    run_tests(check, "tests-cuda", CUDA_TEST_FILES, cap=150, marker="cuda")
    small = ["--rounds", "1", "--seconds", "0.3"] if cpu else []
    training = check.out / "training-step.json"
    check.run("training-step", [str(HERE / "training_step.py"), str(dataset), "--json", str(training),
                                *(small or ["--rounds", "2"]),
                                *(["--device", "cpu", "--model", "tiny", "--batch-size", "8", "--workers", "2",
                                   "--warmup", "2"] if cpu else [])], cap=170)
    check.report["training_step"] = read_json(training)
    scaling = check.out / "scaling.json"
    check.run("scaling", [str(HERE / "scaling.py"), str(dataset), "--json", str(scaling), "--direct",
                          *(small or ["--rounds", "2", "--seconds", "1.5"]),
                          *(["--threads", "1", "2", "--batch-size", "8"] if cpu else [])], cap=130)
    check.report["scaling"] = read_json(scaling)
    check.save()
    if not cpu:
        decode = check.out / "gpu-decode.json"
        sets = [check.work / "data" / name for name in ("photos", "photos-4x") if name in data] or [dataset]
        check.run("gpu-decode", [str(HERE / "gpu_decode.py"), *map(str, sets), "--json", str(decode), "--step",
                                 "--rounds", "2", "--seconds", "1.5"], cap=120)
        check.report["gpu_decode"] = read_json(decode)
        check.save()
        run_tests(check, "tests-loader-on-cuda", DEVICE_SUITE_FILES, cap=100, device="cuda")
    steps = check.report["steps"].values()
    failed = [name for name, s in check.report["steps"].items() if s.get("exit_code") != 0 or s.get("failed")]
    check.report["failed_steps"] = failed
    check.log(f"gpu-check: {len(steps) - len(failed)} of {len(steps)} steps passed"
              + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
