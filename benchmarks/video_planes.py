"""Whether storing decoded frames would pay for video: the CPU time and the
bytes of a window from the stored container against the same window from
stored YCbCr 4:2:0 planes (what the yuv420 mode does for images).

On the clips of ``benchmarks/video.py`` (H.264, 30 frames a second,
640x360 and 1280x720, made there or here), for ``--windows`` random windows
per clip (16 frames at stride 2, a crop of half the frame resized to
224 x 224, as the video benchmark crops), on one thread:

- from the container: ``slip_video_decode_crop_resize``, which decodes from
  the keyframe before the window and crops each frame's planes;
- from stored planes: the window's frames decoded to planes beforehand (not
  timed), then ``slip_planes_crop_resize`` on each, the work a loader of
  stored planes would do besides reading them;

and the bytes a frame takes in each form.  Rounds interleave the two; the
table gives medians with ranges over rounds.

    python benchmarks/video_planes.py [--clips 8] [--seconds 10] [--windows 3] [--rounds 3]

2-core timings drift by 10-40% from run to run (CPU time on one thread,
less so).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import record, summary  # noqa: E402
from video import CROP, FRAMES, REPO, SIZES, STRIDE, make_clips  # noqa: E402


def windows_of(reader, windows: int, rng: np.random.Generator) -> list[tuple[object, np.ndarray]]:
    """``windows`` random windows of each video: (stored video, frame numbers)."""
    chosen = []
    for index in range(len(reader)):
        video = reader.read(index, "video")
        for _ in range(windows):
            start = int(rng.integers(0, len(video) - (FRAMES - 1) * STRIDE))
            chosen.append((video, np.arange(start, start + FRAMES * STRIDE, STRIDE)))
    return chosen


def from_container(chosen) -> float:
    """CPU seconds to decode and crop every window from its container."""
    from slipstream import native

    began = time.process_time()
    for video, frames in chosen:
        native.video_decode_crop_resize(video.container, video.pts[frames], video.seek[frames], video.height,
                                        video.width, 0, 0, video.height // 2, video.width // 2, CROP, CROP)
    return time.process_time() - began


def from_planes(chosen, planes: list[np.ndarray]) -> float:
    """CPU seconds to crop every window from its frames' stored planes."""
    from slipstream import native

    out = np.empty((CROP, CROP, 3), np.uint8)
    began = time.process_time()
    for (video, _), frames in zip(chosen, planes):
        for frame in frames:
            native.planes_crop_resize(frame, video.height, video.width, 0, 0, video.height // 2, video.width // 2,
                                      CROP, CROP, out=out)
    return time.process_time() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=8, help="clips per size (default 8)")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per clip (default 10)")
    parser.add_argument("--windows", type=int, default=3, help="windows per clip (default 3)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--out", type=Path, help="the JSON result (default benchmarks/results/video-planes-DATE.json)")
    parser.add_argument("--work", type=Path, default=REPO / "build" / "bench-video",
                        help="where the clips and the dataset files are kept (shared with benchmarks/video.py)")
    args = parser.parse_args()

    import slipstream as ss
    from slipstream import native

    root = args.work / f"{args.clips}x{args.seconds:g}s"
    folders = make_clips(root, args.clips, args.seconds)
    table = {}
    print(f"{'size':6} {'ms/frame, container':>22} {'ms/frame, planes':>22} {'CPU ratio':>10} "
          f"{'bytes/frame':>12} {'planes bytes/frame':>19} {'bytes ratio':>12}")
    for size in SIZES:
        dataset = root / f"{size}.slip"
        if not dataset.exists():
            ss.write(dataset, ss.VideoFolder(folders[size]), verbose=False)
        reader = ss.open_dataset(dataset)
        chosen = windows_of(reader, args.windows, np.random.default_rng(0))
        planes = [native.video_decode_planes(video.container, video.pts[frames], video.seek[frames], video.height,
                                             video.width) for video, frames in chosen]
        delivered = len(chosen) * FRAMES
        container_ms, planes_ms = [], []
        for _ in range(args.rounds):
            container_ms.append(1000 * from_container(chosen) / delivered)
            planes_ms.append(1000 * from_planes(chosen, planes) / delivered)
        videos = [reader.read(i, "video") for i in range(len(reader))]
        stored = sum(len(v.container) for v in videos) / sum(len(v) for v in videos)
        height, width = videos[0].height, videos[0].width
        decoded = native.planes_bytes(height, width)
        ratio = statistics.median(container_ms) / statistics.median(planes_ms)
        table[size] = {"container_ms_per_frame": container_ms, "planes_ms_per_frame": planes_ms, "cpu_ratio": ratio,
                       "container_bytes_per_frame": stored, "planes_bytes_per_frame": decoded,
                       "bytes_ratio": decoded / stored}
        print(f"{size:6} {summary(container_ms, 3):>22} {summary(planes_ms, 3):>22} {ratio:>9.1f}x "
              f"{stored:>12,.0f} {decoded:>19,} {decoded / stored:>11.0f}x")
    settings = {"clips": args.clips, "seconds": args.seconds, "windows_per_clip": args.windows,
                "rounds": args.rounds, "frames": FRAMES, "stride": STRIDE, "crop": CROP, "threads": 1}
    print(f"wrote {record({'sizes': table, 'settings': settings}, 'video-planes', args.out)}")


if __name__ == "__main__":
    main()
