"""Video windows: slipstream against a PyTorch DataLoader over PyAV, one
over torchcodec, and SPDL's thread-based pipeline, on the same generated clips, each system in its own
process, interleaved round by round.

Clips: ``--clips`` per size, ``--seconds`` long at 30 frames a second,
640x360 and 1280x720, H.264 (libx264, its default keyframe interval of
250 frames), each a camera panning over and zooming into a photo of the
ImageNet sample (``../shared/data/imagenet-sample``; generated pictures
where it is missing).  Every system loads one window per clip per epoch:
16 frames at stride 2 from a random start, one RandomResizedCrop 224 and
flip per window, normalised into float32, batches of 8, 2 workers or
threads (the machine's cores).  The peers' pipelines are in
``peers/video_runner.py``; slipstream's is

    [VideoWindow(frames=16, stride=2), RandomResizedCrop(224), RandomHorizontalFlip(), Normalize(mean, std)]

The image-sequence row stores the first ``--sequence-clips`` 640x360 clips
as JPEG frames (FFmpeg's ``-q:v 2``) and loads the same windows of them,
:data:`WINDOWS_PER_VIDEO` per clip at starts drawn once: slipstream from a
dataset file of the frames (``SequenceWindow`` + the same crop, flip and
normalisation, the starts as the loader's ``indices``) against a DataLoader
decoding the 16 JPEGs of each window with Pillow (``peers/video_runner.py``,
decoder ``pillow``).

Besides clips per second (medians over rounds and epochs, with ranges) it
reports slipstream's CPU milliseconds per frame delivered and the share of
it libavcodec takes: the same windows decoded by the same native call with
a crop of 8 x 8 pixels to 8 x 8 (the decode alone: everything but the
crop, resize and conversion) against the full call, on one thread.

    python benchmarks/video.py [--clips 8] [--seconds 10] [--rounds 3] [--epochs 2]

Needs ``bash benchmarks/peers/install-video.sh`` and
``bash benchmarks/peers/install-spdl.sh`` (the peers' environments)
and FFmpeg's command-line tool.  2-core timings drift by 10-40% from run to
run: compare the ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import record, summary  # noqa: E402

REPO = HERE.parent
PEER_PYTHONS = {"pyav": HERE / ".venvs" / "video" / "bin" / "python",
                "torchcodec": HERE / ".venvs" / "video" / "bin" / "python",
                "spdl": HERE / ".venvs" / "spdl" / "bin" / "python"}
SEQUENCE_PEER = HERE / ".venvs" / "dataloader" / "bin" / "python"
"""The DataLoader + Pillow environment, which loads the windows of JPEG frames."""
WINDOWS_PER_VIDEO = 8
"""Windows per video of the image-sequence row, at starts drawn once (seed 0)."""
PICTURES = REPO.parent / "shared" / "data" / "imagenet-sample"
SIZES = {"360p": (360, 640), "720p": (720, 1280)}
FRAMES, STRIDE, CROP, BATCH = 16, 2, 224, 8
MEAN, STD = (0.45, 0.45, 0.45), (0.225, 0.225, 0.225)


def pictures(count: int) -> list[np.ndarray]:
    """``count`` photos of the ImageNet sample, or generated pictures where it is missing."""
    from slipstream import native

    found = sorted(PICTURES.rglob("*.JPEG"))[:count] if PICTURES.is_dir() else []
    if len(found) == count:
        return [native.jpeg_decode(path.read_bytes()) for path in found]
    from slipstream.sources.synthetic import CLASSES, synthetic_image

    rng = np.random.default_rng(0)
    return [synthetic_image(CLASSES[i % len(CLASSES)], rng) for i in range(count)]


def make_clips(root: Path, clips: int, seconds: float) -> dict[str, Path]:
    """Per size, a folder of ``clips`` clips in two classes (made once: kept in ``root``)."""
    from slipstream.sources.synthetic_video import encode_clip, pan_zoom

    folders = {}
    photos = pictures(clips)
    for name, size in SIZES.items():
        folder = root / name
        for i, photo in enumerate(photos):
            path = folder / f"class_{i % 2}" / f"clip_{i:03d}.mp4"
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                partial = path.with_name("partial-" + path.name)
                encode_clip(partial, pan_zoom(photo, round(seconds * 30), size, zoom=1.5), size, 30.0, "h264")
                partial.rename(path)
        folders[name] = folder
    return folders


def make_frames(clips: Path, root: Path, count: int) -> tuple[Path, Path, list[str]]:
    """The first ``count`` clips of ``clips`` as JPEG frames (``root/frames/<clip>/<n>.jpg``, FFmpeg's
    ``-q:v 2``), a dataset file of them (image, video: the clip's number, frame), and the clips' names in the
    order of their numbers."""
    import slipstream as ss

    folder, dataset = root / "frames", root / "frames.slip"
    videos = sorted(clips.rglob("*.mp4"))[:count]
    for video in videos:
        out = folder / video.stem
        if not out.exists():
            partial = folder / f"partial-{video.stem}"
            partial.mkdir(parents=True, exist_ok=True)
            subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-i", str(video), "-q:v", "2",
                            "-start_number", "0", str(partial / "%05d.jpg")], check=True)
            partial.rename(out)
    if not dataset.exists():
        rows = [(str(path), v, int(path.stem)) for v, video in enumerate(videos)
                for path in sorted((folder / video.stem).glob("*.jpg"))]
        ss.write(dataset, rows, {"image": ss.RGBImageField(), "video": ss.IntField(), "frame": ss.IntField()},
                 verbose=False)
    return folder, dataset, [video.stem for video in videos]


def sequence_starts(dataset: Path, names: list[str]) -> tuple[list[int], list[tuple[str, int]]]:
    """:data:`WINDOWS_PER_VIDEO` window starts per video, drawn once: as dataset indices and as (clip, frame)."""
    import slipstream as ss
    from slipstream.ops import window_starts

    reader = ss.open_dataset(dataset)
    starts = window_starts(reader, FRAMES, STRIDE, group="video")
    videos, frames = reader.metadata["video"]["value"][starts], reader.metadata["frame"]["value"][starts]
    rng = np.random.default_rng(0)
    chosen = sorted(int(i) for v in np.unique(videos)
                    for i in rng.choice(np.flatnonzero(videos == v), WINDOWS_PER_VIDEO, replace=False))
    return [int(starts[i]) for i in chosen], [(names[int(videos[i])], int(frames[i])) for i in chosen]


def run_slipstream(spec: dict) -> dict:
    """slipstream's measurement, in this (fresh) process: windows of a video
    field, or with ``starts`` windows of a dataset of JPEG frames."""
    sys.path.insert(0, str(HERE / "peers"))
    from peer_common import cpu_seconds, peak_rss_mb

    import slipstream as ss
    from slipstream.ops import Normalize, RandomHorizontalFlip, RandomResizedCrop, SequenceWindow, VideoWindow

    sequence = "starts" in spec
    window = SequenceWindow(FRAMES, stride=STRIDE) if sequence else VideoWindow(frames=FRAMES, stride=STRIDE)
    pipelines = {"image" if sequence else "video": [window, RandomResizedCrop(CROP), RandomHorizontalFlip(),
                                                    Normalize(MEAN, STD)]}
    if sequence:
        pipelines.update({"frame": None})
    loader = ss.Loader(spec["data"], batch_size=BATCH, pipelines=pipelines, num_threads=spec["threads"],
                       indices=spec.get("starts"), verbose=False)
    for _ in range(spec["warmup_epochs"]):
        for _batch in loader:
            pass
    rates, cpu_start = [], cpu_seconds()
    for _ in range(spec["epochs"]):
        started, clips = time.perf_counter(), 0
        for _videos, labels in loader:
            clips += len(labels)
        rates.append(clips / (time.perf_counter() - started))
    cpu = cpu_seconds() - cpu_start
    clips = len(spec["starts"]) if sequence else len(loader.reader)
    return {"system": "slipstream", "version": ss.__version__, "epoch_clips_per_s": rates, "clips": clips,
            "cpu_seconds_per_clip": cpu / (clips * spec["epochs"]), "peak_rss_mb": peak_rss_mb(),
            **({} if sequence else {"decode": decode_share(spec["data"])}),
            "settings": {"num_threads": spec["threads"], "batch_size": BATCH, "output": "float32 (T, 3, 224, 224)"}}


def decode_share(path: str, windows: int = 3) -> dict:
    """On one thread, per frame: milliseconds of the full native call (decode,
    crop, resize, conversion) and of the decode alone (an 8 x 8 crop to 8 x 8),
    over ``windows`` random windows per clip."""
    import slipstream as ss
    from slipstream import native

    reader = ss.open_dataset(path)
    rng = np.random.default_rng(0)
    full = alone = 0.0
    frames = 0
    for index in range(len(reader)):
        video = reader.read(index, "video")
        for _ in range(windows):
            start = int(rng.integers(0, len(video) - (FRAMES - 1) * STRIDE))
            chosen = np.arange(start, start + FRAMES * STRIDE, STRIDE)
            pts, seek = video.pts[chosen], video.seek[chosen]
            h, w = video.height // 2, video.width // 2
            began = time.process_time()
            native.video_decode_crop_resize(video.container, pts, seek, video.height, video.width, 0, 0, h, w,
                                            CROP, CROP)
            middle = time.process_time()
            native.video_decode_crop_resize(video.container, pts, seek, video.height, video.width, 0, 0, 8, 8, 8, 8)
            full += middle - began
            alone += time.process_time() - middle
            frames += FRAMES
    return {"ms_per_frame": 1000 * full / frames, "decode_ms_per_frame": 1000 * alone / frames,
            "decode_share": alone / full}


def measure(system: str, data: Path, epochs: int, threads: int, workdir: Path, starts: list | None = None) -> dict:
    """One system's result, from a fresh process (``starts``: the windows of a dataset of JPEG frames)."""
    spec = {"data": str(data), "frames": FRAMES, "stride": STRIDE, "size": CROP, "batch_size": BATCH,
            "threads": threads, "epochs": epochs, "warmup_epochs": 1}
    if starts is not None:
        spec["starts"] = starts
    if system == "slipstream":
        command = [sys.executable, __file__, "--run-slipstream"]
    else:
        spec["decoder"] = system
        python = SEQUENCE_PEER if system == "pillow" else PEER_PYTHONS[system]
        command = [str(python), str(HERE / "peers" / "video_runner.py"), "--spec"]
    spec_path = workdir / f"spec-{system}.json"
    spec_path.write_text(json.dumps(spec))
    done = subprocess.run([*command, str(spec_path)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{system} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=8, help="clips per size (default 8)")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per clip (default 10)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs per process (default 2)")
    parser.add_argument("--threads", type=int, default=2, help="workers or threads (default 2)")
    parser.add_argument("--sizes", nargs="*", default=list(SIZES), choices=list(SIZES))
    systems = ["slipstream", *PEER_PYTHONS]
    parser.add_argument("--systems", nargs="+", default=systems, choices=systems)
    parser.add_argument("--sequence-clips", type=int, default=8,
                        help="640x360 clips stored as JPEG frames for the image-sequence row (0: none; default 8)")
    parser.add_argument("--out", type=Path, help="the JSON result (default benchmarks/results/video-DATE.json)")
    parser.add_argument("--work", type=Path, default=REPO / "build" / "bench-video",
                        help="where the clips and the dataset files are kept")
    parser.add_argument("--run-slipstream", metavar="SPEC", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_slipstream:
        print(json.dumps(run_slipstream(json.loads(Path(args.run_slipstream).read_text()))))
        return
    missing = sorted({str(PEER_PYTHONS[s]) for s in args.systems if s != "slipstream" and not PEER_PYTHONS[s].exists()}
                     | ({str(SEQUENCE_PEER)} if args.sequence_clips and not SEQUENCE_PEER.exists() else set()))
    if missing:
        raise SystemExit(f"missing peer environments ({', '.join(missing)}): bash benchmarks/peers/install-video.sh, "
                         f"install-spdl.sh and install-dataloader.sh")

    import slipstream as ss

    root = args.work / f"{args.clips}x{args.seconds:g}s"
    folders = make_clips(root, args.clips, args.seconds)
    results: dict = {}
    with tempfile.TemporaryDirectory() as workdir:
        for size in args.sizes:
            dataset = root / f"{size}.slip"
            if not dataset.exists():
                ss.write(dataset, ss.VideoFolder(folders[size]), verbose=False)
            runs: dict[str, list[dict]] = {system: [] for system in args.systems}
            for round_ in range(args.rounds):
                for system in args.systems:
                    data = dataset if system == "slipstream" else folders[size]
                    runs[system].append(measure(system, data, args.epochs, args.threads, Path(workdir)))
                    rates = runs[system][-1]["epoch_clips_per_s"]
                    print(f"  {size} round {round_ + 1} {system}: {statistics.median(rates):.2f} clips/s", flush=True)
            results[size] = runs
        if args.sequence_clips:
            folder, frames, names = make_frames(folders["360p"], root, args.sequence_clips)
            indices, named = sequence_starts(frames, names)
            runs = {"slipstream": [], "pillow": []}
            for round_ in range(args.rounds):
                for system in runs:
                    data, starts = (frames, indices) if system == "slipstream" else (folder, named)
                    runs[system].append(measure(system, data, args.epochs, args.threads, Path(workdir), starts))
                    rates = runs[system][-1]["epoch_clips_per_s"]
                    print(f"  JPEG frames round {round_ + 1} {system}: {statistics.median(rates):.2f} windows/s",
                          flush=True)
            results["360p JPEG frames"] = runs
    report(results, args)


def report(results: dict, args: argparse.Namespace) -> None:
    table = {}
    print(f"\n{'size':6} {'system':26} {'clips/s':>22} {'vs best peer':>13} {'CPU ms/frame':>13}")
    for size, runs in results.items():
        rates = {system: [r for run in found for r in run["epoch_clips_per_s"]] for system, found in runs.items()}
        peers = [statistics.median(v) for s, v in rates.items() if s != "slipstream"]
        best = max(peers) if peers else None
        table[size] = {}
        for system, values in rates.items():
            name = runs[system][0]["system"]
            cpu_ms = 1000 * statistics.median(run["cpu_seconds_per_clip"] for run in runs[system]) / FRAMES
            ratio = statistics.median(values) / best if best else float("nan")
            table[size][name] = {"clips_per_s": values, "median": statistics.median(values), "vs_best_peer": ratio,
                                 "cpu_ms_per_frame": cpu_ms, "version": runs[system][0]["version"]}
            print(f"{size:6} {name:26} {summary(values, 2):>22} {ratio:>12.2f}x {cpu_ms:>13.2f}")
        if "slipstream" in runs and "decode" in runs["slipstream"][0]:
            decode = [run["decode"] for run in runs["slipstream"]]
            share = statistics.median(d["decode_share"] for d in decode)
            ms = statistics.median(d["ms_per_frame"] for d in decode)
            alone = statistics.median(d["decode_ms_per_frame"] for d in decode)
            table[size]["slipstream"]["one_thread"] = {"ms_per_frame": ms, "decode_ms_per_frame": alone,
                                                       "decode_share": share}
            print(f"{'':6} slipstream, one thread: {ms:.2f} ms a frame, of which libavcodec's decode {alone:.2f} "
                  f"({100 * share:.0f}%)")
    out = record({"benchmark": "video", "clips": args.clips, "seconds": args.seconds, "rounds": args.rounds,
                  "epochs": args.epochs, "threads": args.threads, "window": {"frames": FRAMES, "stride": STRIDE},
                  "crop": CROP, "batch_size": BATCH, "results": table}, "video", args.out)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
