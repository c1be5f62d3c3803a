"""Video peer runner: a PyTorch DataLoader whose dataset decodes one window
of frames per video with PyAV (system ``"dataloader + pyav"``) or with
torchcodec (``"dataloader + torchcodec"``), then makes the window what
``benchmarks/video.py`` asks of every system.

Run with the video peers' interpreter (``bash benchmarks/peers/install-video.sh``)::

    benchmarks/.venvs/video/bin/python benchmarks/peers/video_runner.py --spec SPEC.json

SPEC.json: ``decoder`` (``"pyav"`` or ``"torchcodec"``), ``data`` (a folder
of videos, ``root/<class>/<video>``), ``frames`` (T), ``stride``, ``size``
(the crop's output side), ``batch_size``, ``threads`` (DataLoader workers),
``epochs`` and ``warmup_epochs``.

Per sample, as a user writes it with either library:

* the window: T frames ``stride`` apart from a uniform random start among
  those where it fits (frame numbers in presentation order);
* PyAV: the container opened with ``av.open``, one decoder thread, a seek
  to the keyframe at or before the first frame (``container.seek(pts,
  backward=True)``), then frames decoded in order until the last one
  wanted, each wanted frame converted to RGB with ``to_ndarray("rgb24")``
  (swscale); the frames' timestamps come from an index of each video's
  packets made when the dataset is built, as slipstream's index is made when
  it writes its file;
* torchcodec: ``VideoDecoder(path, seek_mode="exact",
  num_ffmpeg_threads=1)`` and ``get_frames_at(frame numbers)``: uint8
  (T, 3, H, W);
* one RandomResizedCrop draw for the window (torchvision's sampling: 10
  tries of scale (0.08, 1) and log-uniform ratio (3/4, 4/3), then the
  central crop), the crop resized to ``size`` x ``size`` by
  ``torch.nn.functional.interpolate`` (bilinear, antialiased: torchvision's
  ``resize`` on tensors), a horizontal flip with p=0.5, normalised with the
  Kinetics mean and std into float32 (T, 3, size, size).

DataLoader: ``num_workers=threads``, ``persistent_workers=True``,
``shuffle=True``, ``worker_init_fn`` = ``torch.set_num_threads(1)``.  The
timed loop counts clips only.  Standard output's last line is the JSON
result: ``epoch_clips_per_s``, ``clips``, ``cpu_seconds_per_clip``,
``peak_rss_mb``, ``settings``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_common import cpu_seconds, emit, peak_rss_mb  # noqa: E402

VIDEO_SUFFIXES = {".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi"}
MEAN = torch.tensor([0.45, 0.45, 0.45]).view(1, 3, 1, 1) * 255
STD = torch.tensor([0.225, 0.225, 0.225]).view(1, 3, 1, 1) * 255


def find_videos(folder: Path) -> list[tuple[Path, int]]:
    paths = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES)
    classes = sorted({p.parent.name for p in paths})
    return [(p, classes.index(p.parent.name)) for p in paths]


def crop_box(height: int, width: int, rng: random.Random) -> tuple[int, int, int, int]:
    """torchvision's RandomResizedCrop sampling: (top, left, h, w)."""
    area = height * width
    for _ in range(10):
        target = area * rng.uniform(0.08, 1.0)
        ratio = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        w, h = round(math.sqrt(target * ratio)), round(math.sqrt(target / ratio))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, height - h), rng.randint(0, width - w), h, w
    ratio = width / height
    if ratio < 3 / 4:
        w, h = width, round(width / (3 / 4))
    elif ratio > 4 / 3:
        h, w = height, round(height * (4 / 3))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def augment(frames: torch.Tensor, size: int, rng: random.Random) -> torch.Tensor:
    """One crop and flip for the window of (T, 3, H, W) uint8 frames, then float32 normalised."""
    top, left, h, w = crop_box(frames.shape[2], frames.shape[3], rng)
    x = frames[:, :, top:top + h, left:left + w].float()
    x = F.interpolate(x, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    if rng.random() < 0.5:
        x = x.flip(-1)
    return (x - MEAN) / STD


class PyAVWindows(torch.utils.data.Dataset):
    def __init__(self, videos, frames, stride, size):
        import av

        self.av, self.videos, self.frames, self.stride, self.size = av, videos, frames, stride, size
        # Each video's frame timestamps in presentation order (its packets', demuxed once).
        self.pts = []
        for path, _ in videos:
            with av.open(str(path)) as container:
                stream = container.streams.video[0]
                self.pts.append(sorted(p.pts for p in container.demux(stream) if p.pts is not None))

    def __len__(self):
        return len(self.videos)

    def __getitem__(self, index):
        rng = random.Random()
        pts = self.pts[index]
        span = (self.frames - 1) * self.stride
        start = rng.randint(0, len(pts) - 1 - span)
        wanted = [pts[start + i * self.stride] for i in range(self.frames)]
        chosen = {}
        with self.av.open(str(self.videos[index][0])) as container:
            stream = container.streams.video[0]
            stream.thread_count = 1
            container.seek(wanted[0], stream=stream, backward=True)
            for frame in container.decode(stream):
                if frame.pts in wanted:
                    chosen[frame.pts] = frame.to_ndarray(format="rgb24")
                if frame.pts is not None and frame.pts >= wanted[-1]:
                    break
        window = torch.from_numpy(np.stack([chosen[t] for t in wanted])).permute(0, 3, 1, 2)
        return augment(window, self.size, rng), self.videos[index][1]


class TorchCodecWindows(torch.utils.data.Dataset):
    def __init__(self, videos, frames, stride, size):
        from torchcodec.decoders import VideoDecoder

        self.decoder, self.videos, self.frames, self.stride, self.size = VideoDecoder, videos, frames, stride, size

    def __len__(self):
        return len(self.videos)

    def __getitem__(self, index):
        rng = random.Random()
        decoder = self.decoder(str(self.videos[index][0]), seek_mode="exact", num_ffmpeg_threads=1)
        count = decoder.metadata.num_frames
        span = (self.frames - 1) * self.stride
        start = rng.randint(0, count - 1 - span)
        window = decoder.get_frames_at([start + i * self.stride for i in range(self.frames)]).data
        return augment(window, self.size, rng), self.videos[index][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True)
    spec = json.loads(Path(parser.parse_args().spec).read_text())
    videos = find_videos(Path(spec["data"]))
    kinds = {"pyav": PyAVWindows, "torchcodec": TorchCodecWindows}
    dataset = kinds[spec["decoder"]](videos, spec["frames"], spec["stride"], spec["size"])
    if spec["decoder"] == "pyav":
        import av
        version = av.__version__
    else:
        import torchcodec
        version = torchcodec.__version__
    loader = torch.utils.data.DataLoader(dataset, batch_size=spec["batch_size"], shuffle=True,
                                         num_workers=spec["threads"], persistent_workers=True,
                                         worker_init_fn=lambda _: torch.set_num_threads(1))
    for _ in range(spec["warmup_epochs"]):
        for _batch in loader:
            pass
    rates, cpu_start = [], cpu_seconds()
    for _ in range(spec["epochs"]):
        started, clips = time.perf_counter(), 0
        for clips_batch, labels in loader:
            clips += len(labels)
        rates.append(clips / (time.perf_counter() - started))
    cpu = cpu_seconds() - cpu_start
    emit({"system": f"dataloader + {spec['decoder']}", "version": version, "epoch_clips_per_s": rates,
          "clips": len(dataset), "cpu_seconds_per_clip": cpu / (len(dataset) * spec["epochs"]),
          "peak_rss_mb": peak_rss_mb(),
          "settings": {"num_workers": spec["threads"], "batch_size": spec["batch_size"], "shuffle": True,
                       "decoder_threads": 1, "output": f"float32 (T, 3, {spec['size']}, {spec['size']})"}})


if __name__ == "__main__":
    main()
