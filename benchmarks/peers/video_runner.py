"""Video peer runner: a PyTorch DataLoader whose dataset decodes one window
of frames per video with PyAV (system ``"dataloader + pyav"``) or with
torchcodec (``"dataloader + torchcodec"``), or SPDL's thread-based pipeline
decoding it with ``spdl.io`` (``"spdl"``), then makes the window what
``benchmarks/video.py`` asks of every system.

Run with the video peers' interpreter (``bash benchmarks/peers/install-video.sh``),
or for SPDL with SPDL's (``bash benchmarks/peers/install-spdl.sh``)::

    benchmarks/.venvs/video/bin/python benchmarks/peers/video_runner.py --spec SPEC.json

With ``decoder`` ``"pillow"`` (run with the DataLoader peer's interpreter,
``bash benchmarks/peers/install-dataloader.sh``) it loads windows of a video
stored as JPEG frames instead, ``data`` a folder of ``<video>/<n>.jpg`` and
``starts`` the ``(video, first frame)`` of each window.

SPEC.json: ``decoder`` (``"pyav"``, ``"torchcodec"``, ``"spdl"`` or ``"pillow"``), ``data`` (a folder
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
* SPDL: ``spdl.io.demux_video`` and ``sample_decode_video(packets, frame
  numbers)`` (the GOPs that hold them, one decoder thread), RGB by FFmpeg's
  filter graph, ``convert_frames``; batches from ``PipelineBuilder``:
  source -> ``pipe(window, concurrency=threads)`` -> ``aggregate`` ->
  stack, ``build(num_threads=threads)``;
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
import importlib.metadata
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_common import cpu_seconds, emit, peak_rss_mb, random_resized_crop_box  # noqa: E402

VIDEO_SUFFIXES = {".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi"}
MEAN = torch.tensor([0.45, 0.45, 0.45]).view(1, 3, 1, 1) * 255
STD = torch.tensor([0.225, 0.225, 0.225]).view(1, 3, 1, 1) * 255


def find_videos(folder: Path) -> list[tuple[Path, int]]:
    paths = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES)
    classes = sorted({p.parent.name for p in paths})
    return [(p, classes.index(p.parent.name)) for p in paths]


def augment(frames: torch.Tensor, size: int, rng: random.Random) -> torch.Tensor:
    """One crop and flip for the window of (T, 3, H, W) uint8 frames, then float32 normalised."""
    left, top, right, bottom = random_resized_crop_box(frames.shape[3], frames.shape[2], (0.08, 1.0), rng)
    x = frames[:, :, top:bottom, left:right].float()
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


class JPEGSequenceWindows(torch.utils.data.Dataset):
    """Windows of a video stored as JPEG frames (``frames/<video>/<n>.jpg``):
    the window starting at each of ``starts`` (``(video, frame)`` pairs),
    its 16 images decoded by Pillow, one RandomResizedCrop draw for the
    window applied to each with ``Image.resize(box=...)`` (bilinear), a
    flip, and float32 normalisation in torch."""

    def __init__(self, folder, starts, frames, stride, size):
        from PIL import Image

        self.image, self.folder, self.frames, self.stride, self.size = Image, Path(folder), frames, stride, size
        self.starts = [tuple(start) for start in starts]
        self.labels = {video: i % 2 for i, video in enumerate(sorted({v for v, _ in self.starts}))}

    def __len__(self):
        return len(self.starts)

    def __getitem__(self, index):
        rng = random.Random()
        video, first = self.starts[index]
        paths = [self.folder / video / f"{first + i * self.stride:05d}.jpg" for i in range(self.frames)]
        images = [self.image.open(path).convert("RGB") for path in paths]
        box = random_resized_crop_box(images[0].width, images[0].height, (0.08, 1.0), rng)
        flip = rng.random() < 0.5
        out = []
        for image in images:
            crop = image.resize((self.size, self.size), self.image.BILINEAR, box=box)
            if flip:
                crop = crop.transpose(self.image.FLIP_LEFT_RIGHT)
            out.append(np.asarray(crop))
        window = torch.from_numpy(np.stack(out)).permute(0, 3, 1, 2).float()
        return (window - MEAN) / STD, self.labels[video]


class SPDLWindows:
    """SPDL's way: the packets demuxed (``spdl.io.demux_video``) and the
    window's frames decoded from the GOPs that hold them
    (``spdl.io.sample_decode_video``, one decoder thread), converted to RGB
    by FFmpeg's filter graph and to an array (``convert_frames``)."""

    def __init__(self, videos, frames, stride, size):
        import spdl.io

        self.io, self.videos, self.frames, self.stride, self.size = spdl.io, videos, frames, stride, size
        self.config = spdl.io.decode_config(decoder_options={"threads": "1"})
        self.rgb = spdl.io.get_video_filter_desc(pix_fmt="rgb24")

    def __len__(self):
        return len(self.videos)

    def __getitem__(self, index):
        rng = random.Random()
        packets = self.io.demux_video(str(self.videos[index][0]))
        span = (self.frames - 1) * self.stride
        start = rng.randint(0, len(packets) - 1 - span)
        chosen = [start + i * self.stride for i in range(self.frames)]
        decoded = self.io.sample_decode_video(packets, chosen, decode_config=self.config, filter_desc=self.rgb)
        window = torch.from_numpy(np.asarray(self.io.convert_frames(decoded))).permute(0, 3, 1, 2)
        return augment(window, self.size, rng), self.videos[index][1]


def spdl_batches(dataset, batch_size: int, threads: int):
    """An epoch of batches from SPDL's thread-based pipeline: shuffled indices
    -> pipe(window, concurrency=threads) -> aggregate(batch_size) -> stack."""
    from spdl.pipeline import PipelineBuilder

    order = list(range(len(dataset)))
    random.shuffle(order)

    def stack(items):
        return torch.stack([clip for clip, _ in items]), torch.tensor([label for _, label in items])

    pipeline = (PipelineBuilder().add_source(order).pipe(dataset.__getitem__, concurrency=threads)
                .aggregate(batch_size).pipe(stack).add_sink(4).build(num_threads=threads, max_failures=0))
    with pipeline.auto_stop():
        yield from pipeline.get_iterator()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True)
    spec = json.loads(Path(parser.parse_args().spec).read_text())
    if spec["decoder"] == "pillow":
        dataset = JPEGSequenceWindows(spec["data"], spec["starts"], spec["frames"], spec["stride"], spec["size"])
    else:
        kinds = {"pyav": PyAVWindows, "torchcodec": TorchCodecWindows, "spdl": SPDLWindows}
        dataset = kinds[spec["decoder"]](find_videos(Path(spec["data"])), spec["frames"], spec["stride"],
                                         spec["size"])
    versions = {"pyav": "av", "torchcodec": "torchcodec", "spdl": "spdl.io", "pillow": "pillow"}
    version = importlib.metadata.version(versions[spec["decoder"]].replace(".", "_"))
    if spec["decoder"] == "spdl":
        torch.set_num_threads(1)
        system = "spdl"

        def epoch():
            return spdl_batches(dataset, spec["batch_size"], spec["threads"])
    else:
        system = f"dataloader + {spec['decoder']}"
        loader = torch.utils.data.DataLoader(dataset, batch_size=spec["batch_size"], shuffle=True,
                                             num_workers=spec["threads"], persistent_workers=True,
                                             worker_init_fn=lambda _: torch.set_num_threads(1))

        def epoch():
            return iter(loader)
    for _ in range(spec["warmup_epochs"]):
        for _batch in epoch():
            pass
    rates, cpu_start = [], cpu_seconds()
    for _ in range(spec["epochs"]):
        started, clips = time.perf_counter(), 0
        for _clips, labels in epoch():
            clips += len(labels)
        rates.append(clips / (time.perf_counter() - started))
    cpu = cpu_seconds() - cpu_start
    emit({"system": system, "version": version, "epoch_clips_per_s": rates,
          "clips": len(dataset), "cpu_seconds_per_clip": cpu / (len(dataset) * spec["epochs"]),
          "peak_rss_mb": peak_rss_mb(),
          "settings": {"workers_or_threads": spec["threads"], "batch_size": spec["batch_size"], "shuffle": True,
                       "decoder_threads": 1, "output": f"float32 (T, 3, {spec['size']}, {spec['size']})"}})


if __name__ == "__main__":
    main()
