"""Decoding on the GPU: ``DecodeOnDevice(device)`` at the head of an image
pipeline moves the JPEG decode, the crop, the resize, the flip and the
normalization of every sample onto a CUDA device::

    {"image": [DecodeOnDevice("cuda"), RandomResizedCrop(224), RandomHorizontalFlip(),
               Normalize(mean, std, torch.float16)]}

The pipeline reads the same as its CPU form with one entry in front.  What
changes is where the work runs:

* the compiled stage, on the CPU, draws each sample's crop and flip exactly
  as the CPU pipeline's crop does (the same region functions and the same
  counter-based randomness, so exact resume and determinism hold) and
  copies the sample's stored bytes, with a small header saying what to do
  with them, into the batch's pinned host memory;
* a torch stage then decodes the whole batch with nvJPEG through
  ``torchvision.io.decode_jpeg(..., device=device)`` (stored raw pixels are
  copied up as they are), crops and resizes each image with
  ``torch.nn.functional.interpolate`` (the crop's bilinear or bicubic, with
  antialiasing, as torchvision's tensor transforms; ``area`` for
  ``interpolation="area"``),
  flips, and normalizes the batch on the device.

The crop, flip and normalization are folded into the ``DecodeOnDevice``
entry; any other per-sample operation has no device form, so the pipeline
must end there (torch batch operations such as those of
:mod:`slipstream.ops.batch` may follow, running on the device).  Pixels
differ slightly from the CPU pipeline's: nvJPEG's inverse DCT and chroma
upsampling are not libjpeg-turbo's, and the CPU path decodes at a reduced
DCT scale before resizing.

Each batch's host memory holds ``max_size`` bytes per sample (default: the
largest image stored in the field), so a field with a few very large JPEGs
is better given an explicit ``max_size``; a sample over it fails as a
decode error, following the loader's ``on_error``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
from numba import njit, uint64

from slipstream import native
from slipstream.compiler import Allocation, Operation, State
from slipstream.compiler import random as rnd
from slipstream.compiler.kinds import Kind
from slipstream.compiler.operation import torch_device, torch_dtype
from slipstream.compiler.params import Custom, Declares, OrNone, Refused, param
from slipstream.compiler.rewrites import FieldOperation, Foldable
from slipstream.errors import ArgumentError, DecodeError
from slipstream.fields.decoders import DecodeSource, ImageFieldDecoder
from slipstream.fields.image_modes import RAW_MODE, YUV420_MODE
from slipstream.ops.crops import CROP_DRAWS, Crop, CropDecoder
from slipstream.ops.pack import Normalize
from slipstream.ops.stored import SAMPLE_BYTES

HEADER = 64
"""Bytes in front of each sample's stored bytes: little-endian int32 words
(see the ``WORD_*`` constants), then zeros."""

WORD_LENGTH, WORD_TOP, WORD_LEFT, WORD_HEIGHT, WORD_WIDTH, WORD_FLIP, WORD_RAW = 0, 1, 2, 3, 4, 5, 6
WORD_IMAGE_HEIGHT, WORD_IMAGE_WIDTH, WORD_INDEX_LOW, WORD_INDEX_HIGH = 7, 8, 9, 10
"""The header's words: the stored length in bytes (0 for a sample that
failed before the device saw it), the crop region (top, left, height,
width) in stored pixels, 1 to flip, 1 for raw stored pixels (else a JPEG),
the stored image's height and width, and the dataset index (low and high
32 bits)."""

_WORDS = 11


def _torchvision_missing() -> str | None:
    """Why ``torchvision.io.decode_jpeg`` cannot be used here, or None."""
    if importlib.util.find_spec("torchvision") is None:
        return ("DecodeOnDevice decodes with torchvision.io.decode_jpeg (nvJPEG on CUDA), and torchvision is not "
                "installed in this Python: install the torchvision that matches your torch")
    return None


def _device_named(value: Any) -> Any:
    """A torch device, as a ``torch.device`` (imports torch); whether this
    machine has it is checked when the loader binds the entry."""
    import torch

    if isinstance(value, (bool, np.bool_)):
        raise Refused()
    try:
        return torch.device(value)
    except (RuntimeError, TypeError):
        raise Refused() from None


def _instance_of(cls: type) -> Callable[[Any], Any]:
    """A check that keeps an instance of ``cls`` and refuses anything else."""

    def check(value: Any) -> Any:
        if not isinstance(value, cls):
            raise Refused()
        return value

    return check


DEVICE_NAME = Custom(_device_named, 'a torch device (a `torch.device`, or its name: `"cuda"`, `"cuda:1"`, `"cpu"`)',
                     bad=("gpu0", "CPU", -1, math.nan, True, None, [1.0]), good="cpu")
"""Where the images are decoded."""

FOLDED_CROP = OrNone(Custom(_instance_of(Crop), "a crop (`RandomResizedCrop`, `CenterCrop`, `Resize`)",
                            bad=("RandomResizedCrop", 224, math.nan, True), good=None))
FOLDED_NORMALIZE = OrNone(Custom(_instance_of(Normalize), "a `Normalize`", bad=("Normalize", 0.5, math.nan, True),
                                 good=None))


@dataclasses.dataclass(frozen=True)
class DecodeOnDevice(Declares, FieldOperation, Foldable):
    """Decode, crop, resize, flip and normalize an image field's samples on
    ``device`` (see the module docstring).  Put it first in the pipeline,
    followed by a crop (``RandomResizedCrop``, ``CenterCrop``, ``Resize``
    then ``CenterCrop``), optionally ``RandomHorizontalFlip``, and
    optionally ``ToTensor``/``Normalize``; the loader folds them into this
    entry.  Without a ``Normalize`` the samples are (height, width, 3)
    uint8, as on the CPU; with one, (3, height, width) of its dtype.

    Args:
        device: a CUDA device (``"cuda"``, ``"cuda:1"``); its form is
            checked when made, and that this machine has it when the loader
            is built.  ``"cpu"`` runs the same code with torchvision's CPU
            decoder.
        max_size: bytes of host memory per sample for its stored bytes
            (default: the field's largest stored image).
    """

    device: Any = param(DEVICE_NAME, "where the JPEGs are decoded and the batch is made; `\"cpu\"` runs the same code "
                        "with torchvision's CPU decoder; that this machine has it is checked when the loader is built",
                        default="cuda", structural=True)
    max_size: int | None = param(OrNone(SAMPLE_BYTES), "bytes of pinned host memory per sample for its stored JPEG; "
                                 "default: the field's largest", default=None, structural=True)
    crop: Crop | None = param(FOLDED_CROP, "set by the loader from the crop written after it; leave `None`",
                              default=None, structural=True)
    normalize: Normalize | None = param(FOLDED_NORMALIZE, "set by the loader from the `Normalize` written after the "
                                        "crop; leave `None`", default=None, structural=True)

    def fold(self, following: Any) -> Any:
        """The crop, then what the crop itself folds (a flip; ``Resize``
        takes a ``CenterCrop``), then a ``Normalize`` (which takes a
        ``Normalize`` after a ``ToTensor``) join this entry."""
        if self.crop is None:
            return dataclasses.replace(self, crop=following) if isinstance(following, Crop) else None
        if self.normalize is None:
            joined = self.crop.fold(following)
            if joined is not None:
                return dataclasses.replace(self, crop=joined)
            return dataclasses.replace(self, normalize=following) if isinstance(following, Normalize) else None
        joined = self.normalize.fold(following)
        return None if joined is None else dataclasses.replace(self, normalize=joined)

    def bind(self, source: DecodeSource, field: str) -> list[Any]:
        """The compiled planner of ``field``'s samples, then the device stage."""
        try:
            device = torch_device(self.device)
        except ArgumentError as exc:
            raise ArgumentError(f"DecodeOnDevice: {exc}") from None
        if self.crop is None:
            raise ArgumentError("DecodeOnDevice must be followed by a crop that gives every sample one size "
                                "(RandomResizedCrop, CenterCrop, or Resize then CenterCrop)")
        self.crop.bind(source, field)  # the checks the crop makes on the CPU (Resize(s) alone has no one size)
        modes = source.records(field, "how every image is stored")["mode"]
        if np.any(modes == YUV420_MODE):
            raise ArgumentError(f"{source.reader.path}, field {field!r}: DecodeOnDevice decodes JPEGs and raw pixels, "
                                f"and this field stores YCbCr 4:2:0 planes (write_mode='yuv420'), which the CPU "
                                f"converts with no entropy decoding: use the crop alone")
        if np.any(modes != RAW_MODE):
            problem = _torchvision_missing()
            if problem is not None:
                raise ArgumentError(f"{source.reader.path}, field {field!r}: {problem}")
        sizes = source.sizes(field)
        max_size = int(self.max_size if self.max_size is not None else (sizes.max() if sizes.size else 1))
        planner = DevicePlanner(source, field, self.crop, max(1, max_size))
        normalize = self.normalize
        stage = DeviceDecode(device=device, size=self.crop.output_size, interpolation=self.crop.interpolation,
                             mean=None if normalize is None else normalize.mean,
                             std=None if normalize is None else normalize.std,
                             dtype=None if normalize is None else torch_dtype(normalize.dtype),
                             where=f"{source.reader.path}, field {field!r}")
        return [planner, stage]


@njit(nogil=True, inline="always")
def _put(out, word, value):
    """Write ``value`` as the little-endian int32 ``word`` of ``out``'s header."""
    at = 4 * word
    v = np.int64(value)
    for b in range(4):
        out[at + b] = np.uint8((v >> (8 * b)) & 0xFF)


@dataclasses.dataclass(frozen=True, eq=False)
class DevicePlanner(ImageFieldDecoder):
    """The compiled half of :class:`DecodeOnDevice`: for each sample, the
    crop region and flip drawn as ``crop``'s own decoder draws them, and
    the stored bytes, into a (``HEADER`` + ``max_size``,) uint8 sample."""

    source: DecodeSource = dataclasses.field(repr=False)
    field: str
    crop: Crop
    max_size: int

    def draws_like(self) -> CropDecoder:
        """The CPU pipeline's decoder for the same crop: the same draws."""
        return CropDecoder(self.source, self.field, self.crop)

    def declare(self, state: State | None) -> tuple[State, Allocation]:
        shape = (HEADER + int(self.max_size),)
        return State(shape=shape, dtype=np.uint8), Allocation(shape, np.uint8)

    def runtime_values(self) -> tuple[float, tuple[Any, ...]]:
        """The crop's flip probability and the values of its region function."""
        return (float(self.crop.flip_p), self.crop.region_values())

    def generate_code(self):
        region = self.crop.region()
        too_long, raw_mode, header, put = np.int32(native.Status.EBUFFER), RAW_MODE, uint64(HEADER), _put

        def plan(storage, offsets, sizes, heights, widths, modes, failed, decodes, index, out, status, key, values):
            flip_p, region_values = values
            height, width = heights[index], widths[index]
            y, x, h, w = region(key, height, width, region_values)
            flip = flip_p > 0.0 and rnd.uniform(key, CROP_DRAWS.flip) < flip_p
            start, size = uint64(offsets[index]), uint64(sizes[index])
            status[0] = failed  # the known failure status: no values, or its bytes are known to be corrupt
            if status[0] == 0 and size > uint64(out.size) - header:
                status[0] = too_long
            length = size if status[0] == 0 else uint64(0)
            put(out, WORD_LENGTH, length)
            put(out, WORD_TOP, y)
            put(out, WORD_LEFT, x)
            put(out, WORD_HEIGHT, h)
            put(out, WORD_WIDTH, w)
            put(out, WORD_FLIP, 1 if flip else 0)
            put(out, WORD_RAW, 1 if modes[index] == raw_mode else 0)
            put(out, WORD_IMAGE_HEIGHT, height)
            put(out, WORD_IMAGE_WIDTH, width)
            put(out, WORD_INDEX_LOW, np.int64(index) & 0xFFFFFFFF)
            put(out, WORD_INDEX_HIGH, np.int64(index) >> 32)
            for j in range(length):
                out[header + j] = storage[start + j]
            return out

        return plan


def read_headers(batch: Any) -> np.ndarray:
    """The (batch, 11) int64 header words of a planned batch (a uint8 CPU
    tensor or array of (batch, ``HEADER`` + max_size))."""
    array = batch.numpy() if hasattr(batch, "numpy") else np.asarray(batch)
    words = np.ascontiguousarray(array[:, :4 * _WORDS]).view("<i4")
    return words.astype(np.int64)


@dataclasses.dataclass(frozen=True, eq=False)
class DeviceDecode(Operation):
    """The torch half of :class:`DecodeOnDevice`: a planned batch of stored
    bytes in, the decoded, cropped, resized, flipped and normalized batch on
    ``device`` out (see the module docstring).

    ``size`` is the output (height, width); ``mean``, ``std`` (0..1 scale)
    and ``dtype`` are the ``Normalize`` folded in, or all None for uint8
    (height, width, 3) samples; ``where`` names the dataset and field in
    errors."""

    device: Any
    size: tuple[int, int]
    interpolation: str
    mean: Sequence[float] | None
    std: Sequence[float] | None
    dtype: Any
    where: str
    kind: ClassVar[Kind] = Kind.TORCH

    def declare(self, state: State):
        if len(state.shape) != 1 or np.dtype(state.dtype) != np.uint8 or state.shape[0] <= HEADER:
            raise ValueError(f"DeviceDecode takes planned samples of (HEADER + max_size,) uint8, got "
                             f"{state.shape} {state.dtype}")
        h, w = self.size
        if self.dtype is None:
            return State(shape=(h, w, 3), dtype=np.uint8, device=str(self.device)), None
        return State(shape=(3, h, w), dtype=self.dtype, device=str(self.device)), None

    def generate_code(self) -> Callable[[Any], Any]:
        import torch

        device, (out_h, out_w), where = self.device, self.size, self.where
        resize = _resizer(self.interpolation, out_h, out_w)
        if self.mean is not None:
            std = torch.tensor(self.std, dtype=torch.float32, device=device).view(3, 1, 1)
            scale = 1.0 / (255.0 * std)
            shift = -torch.tensor(self.mean, dtype=torch.float32, device=device).view(3, 1, 1) / std
        out_dtype = self.dtype

        def decode_all(datas: list[Any], rows: list[int], heads: np.ndarray) -> list[Any]:
            if not datas:
                return []
            from torchvision.io import ImageReadMode, decode_jpeg

            try:
                return decode_jpeg(datas, mode=ImageReadMode.RGB, device=device)
            except RuntimeError:
                for data, row in zip(datas, rows):  # find the sample to name
                    try:
                        decode_jpeg(data, mode=ImageReadMode.RGB, device=device)
                    except RuntimeError as exc:
                        raise DecodeError(f"{where}: sample {_index(heads[row])} cannot be decoded on {device} by "
                                          f"torchvision.io.decode_jpeg: {exc}") from exc
                raise

        def run(x: Any) -> Any:
            heads = read_headers(x)
            batch = torch.zeros((x.shape[0], 3, out_h, out_w), dtype=torch.float32, device=device)
            lengths = heads[:, WORD_LENGTH]
            rows = [row for row in range(x.shape[0]) if lengths[row] > 0 and heads[row, WORD_RAW] == 0]
            images = decode_all([x[row, HEADER:HEADER + int(lengths[row])] for row in rows], rows, heads)
            for row in range(x.shape[0]):  # stored pixels go up as they are
                if lengths[row] > 0 and heads[row, WORD_RAW] == 1:
                    image_h, image_w = int(heads[row, WORD_IMAGE_HEIGHT]), int(heads[row, WORD_IMAGE_WIDTH])
                    pixels = x[row, HEADER:HEADER + image_h * image_w * 3].view(image_h, image_w, 3)
                    rows.append(row)
                    images.append(pixels.to(device, non_blocking=True).permute(2, 0, 1))
            for row, image in zip(rows, images):
                head = heads[row]
                if tuple(image.shape[1:]) != (head[WORD_IMAGE_HEIGHT], head[WORD_IMAGE_WIDTH]):
                    raise DecodeError(f"{where}: sample {_index(head)} decodes to {tuple(image.shape[1:])} pixels on "
                                      f"{device}, but its stored size is {head[WORD_IMAGE_HEIGHT]}x"
                                      f"{head[WORD_IMAGE_WIDTH]}")
                top, left = int(head[WORD_TOP]), int(head[WORD_LEFT])
                region = image[:, top:top + int(head[WORD_HEIGHT]), left:left + int(head[WORD_WIDTH])]
                batch[row] = resize(region.unsqueeze(0).float())[0]
            flips = np.flatnonzero(heads[:, WORD_FLIP])
            if flips.size:
                chosen = torch.from_numpy(flips).to(device)
                batch[chosen] = batch[chosen].flip(-1)
            if out_dtype is None:
                return batch.round_().clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous()
            return batch.mul_(scale).add_(shift).to(out_dtype)

        return run

    def fingerprint(self) -> str:
        return f"DeviceDecode:{self.device}:{self.size}:{self.interpolation}:{self.mean}:{self.std}:{self.dtype}"


def _index(head: np.ndarray) -> int:
    """The dataset index a header holds."""
    return int(head[WORD_INDEX_LOW] & 0xFFFFFFFF) | (int(head[WORD_INDEX_HIGH]) << 32)


def _resizer(interpolation: str, out_h: int, out_w: int) -> Callable[[Any], Any]:
    """``interpolate`` to (out_h, out_w) on a (1, 3, h, w) float tensor:
    bilinear or bicubic with antialiasing (torchvision's tensor ``resize``),
    or area."""
    import torch.nn.functional as F  # noqa: N812

    if interpolation == "area":
        return lambda image: F.interpolate(image, size=(out_h, out_w), mode="area")
    return lambda image: F.interpolate(image, size=(out_h, out_w), mode=interpolation, antialias=True,
                                       align_corners=False)
