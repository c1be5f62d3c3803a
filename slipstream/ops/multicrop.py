"""Multi-crop for self-supervised learning: several crops of each image
(e.g. 2 global 224 px crops and 6 local 96 px crops) from one decode.

Per sample, every crop's region is drawn first (RandomResizedCrop's
sampling, each crop with its own scale range); the union of the regions is
decoded once, at the finest DCT scale any crop needs; then each crop's exact
rectangle (its edges divided by the scale, so between pixels in general)
is resized out of that decoded block with ``slip_resize_region``.  Decoding per crop would decode the
overlapping parts again for every crop.  With ``yoked=True`` every crop
shares the center of the first (clamped to the image), as methods that
compare crops of one location use.

Crop ``k`` is the decoder's named output ``crop_k``; each output reads
its crop through the handle of the decoding output
(:class:`~slipstream.compiler.handles.Output`)::

    pipelines = multi_crop_pipelines(global_crops=2, local_crops=6)
    # {crops: Internal(View("image", [MultiCrop(...)])),           crops = Output("crops")
    #  "global_0": [RefNode(crops, output="crop_0"), flip, normalize], ...}
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from numba import njit, uint64

from slipstream import native
from slipstream.compiler import Allocation, State
from slipstream.compiler import random as rnd
from slipstream.compiler.jit import cached_njit, uncached_njit
from slipstream.compiler.params import Bool, Choice, Declares, Float, Int, Many, Pair, enum_name, param
from slipstream.errors import ArgumentError
from slipstream.compiler.rewrites import FieldOperation
from slipstream.fields.decoders import DecodeSource, ImageFieldDecoder
from slipstream.ops.crops import ATTEMPTS, INTERPOLATIONS, random_resized_crop_params


_DRAWS = rnd.named_draws("crop")  # crop + k: the sub-key crop k draws from


@cached_njit
def multi_crop_regions(key, height, width, scale_lo, scale_hi, log_ratio_lo, log_ratio_hi, yoked):
    """(top, left, h, w) of every crop of a sample: crop ``k`` sampled as
    RandomResizedCrop with area fraction in [scale_lo[k], scale_hi[k]) from
    its own key; with ``yoked``, moved to the first crop's center (kept
    inside the image)."""
    count = scale_lo.size
    out = np.empty((count, 4), np.int64)
    for k in range(count):
        y, x, h, w = random_resized_crop_params(rnd.draw(key, _DRAWS.crop + k), height, width, scale_lo[k], scale_hi[k],
                                                log_ratio_lo, log_ratio_hi, ATTEMPTS)
        if yoked and k > 0:
            cy, cx = out[0, 0] + out[0, 2] // 2, out[0, 1] + out[0, 3] // 2
            y, x = min(max(cy - h // 2, 0), height - h), min(max(cx - w // 2, 0), width - w)
        out[k, 0], out[k, 1], out[k, 2], out[k, 3] = y, x, h, w
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class MultiCropDecoder(ImageFieldDecoder):
    """Decodes all crops of a sample with one native decode: crop ``k`` is
    the named output ``crop_k``, a (side, side, 3) uint8 image (its value is
    crop 0)."""

    source: DecodeSource = dataclasses.field(repr=False)
    field: str
    crop: MultiCrop

    @property
    def sizes(self) -> tuple[int, ...]:
        """The crops' sides."""
        return self.crop.sizes

    def runtime_values(self) -> tuple[np.ndarray, np.ndarray, float, float]:
        """Each crop's lowest and highest area fraction, and the logarithms of the ratio range."""
        scales = np.array(self.crop.scales, np.float64).reshape(-1, 2)
        return (scales[:, 0].copy(), scales[:, 1].copy(), math.log(self.crop.ratio[0]), math.log(self.crop.ratio[1]))

    def declare(self, state: State | None) -> tuple[State, list[Allocation]]:
        records = self.source.records(self.field, "the largest image's size")
        largest = (int(records["height"].max()), int(records["width"].max())) if len(records) else (1, 1)
        total = sum(offset_size[1] for offset_size in crop_layout(self.sizes))
        crops = [Allocation((side, side, 3), np.uint8, name=f"crop_{k}") for k, side in enumerate(self.sizes)]
        return State(shape=crops[0].shape, dtype=np.uint8), [
            *crops,
            Allocation((total,), np.uint8),  # the crops packed one after another, as decoded (per thread)
            Allocation((*largest, 3), np.uint8),  # the decoded union of the regions (per thread)
        ]

    def generate_code(self):
        count = len(self.sizes)
        sizes = np.array(self.sizes, np.int64)
        offsets = np.array([o for o, _ in crop_layout(self.sizes)], np.int64)
        yoked, interp = self.crop.yoked, int(INTERPOLATIONS[self.crop.interpolation])
        decode_region, scale_for = native.slip_jpeg_decode, native.slip_jpeg_scale_for
        resize, resize_raw, convert_crop = native.slip_resize_region, native.slip_resize, native.slip_planes_crop_resize

        def each_crop(crop_into):
            """A sample decoder that makes each crop straight from the stored bytes with
            ``crop_into(data, height, width, crop, dst, side) -> status``."""

            @njit(nogil=True, inline="always")
            def from_stored(data, out, args):
                height, width, crops, _ = args
                status = 0
                for k in range(count):
                    side = sizes[k]
                    crop_status = crop_into(data, height, width, crops[k], out[offsets[k]:offsets[k] + side * side * 3],
                                            side)
                    if crop_status != 0:
                        status = crop_status
                return status

            return from_stored

        @njit(nogil=True, inline="always")
        def from_raw_pixels(data, height, width, crop, dst, side):
            return resize_raw(data, height, width, 3, width * 3, crop[0], crop[1], crop[2], crop[3], dst, side, side,
                              side * 3, interp, 0)

        @njit(nogil=True, inline="always")
        def from_stored_planes(data, height, width, crop, dst, side):
            return convert_crop(data, uint64(data.size), height, width, crop[0], crop[1], crop[2], crop[3], side,
                                side, 0, interp, dst, dst.size, side * 3)

        @njit(nogil=True, inline="always")
        def from_jpeg(data, out, args):
            _, _, crops, block = args
            top, left = crops[:, 0].min(), crops[:, 1].min()
            bottom, right = (crops[:, 0] + crops[:, 2]).max(), (crops[:, 1] + crops[:, 3]).max()
            d = 8
            for k in range(count):  # the finest scale any crop needs
                d = min(d, scale_for(crops[k, 2], crops[k, 3], sizes[k], sizes[k]))
            origin_y, origin_x = top // d, left // d
            block_h, block_w = -(-bottom // d) - origin_y, -(-right // d) - origin_x
            status = decode_region(data, uint64(data.size), top, left, bottom - top, right - left, d, 0, block,
                                   block.size, block.strides[0])
            if status != 0:
                return status
            for k in range(count):  # each crop's exact rectangle in the decoded block's pixels
                cy, cx = crops[k, 0] / d - origin_y, crops[k, 1] / d - origin_x
                ch = min(crops[k, 2] / d, block_h - cy)
                cw = min(crops[k, 3] / d, block_w - cx)
                side = sizes[k]
                dst = out[offsets[k]:offsets[k] + side * side * 3]
                crop_status = resize(block, block_h, block_w, 3, block.strides[0], cy, cx, ch, cw, dst, side, side,
                                     side * 3, interp, 0)
                if crop_status != 0:
                    status = crop_status
            return status

        decode_sample = self.sample_decoder(each_crop(from_raw_pixels), from_jpeg, each_crop(from_stored_planes))

        @uncached_njit
        def decode_all(storage, offsets_, sizes_, heights, widths, modes, failed, decodes, index, outputs, packed,
                       block, status, key, values):
            scale_lo, scale_hi, log_lo, log_hi = values
            height, width = heights[index], widths[index]
            crops = multi_crop_regions(key, height, width, scale_lo, scale_hi, log_lo, log_hi, yoked)
            decode_sample(storage, offsets_, sizes_, modes, failed, decodes, index, packed, status,
                          (height, width, crops, block))
            for k in range(count):  # each crop into its own output (zeros for a failed sample)
                dst = outputs[k].reshape(-1)
                src = packed[offsets[k]:offsets[k] + dst.size]
                for j in range(dst.size):
                    dst[j] = src[j]
            return outputs[0]

        return _with_outputs(decode_all, count)


def _with_outputs(decode_all: Any, count: int) -> Any:
    """The decoder's code, taking the ``count`` crop outputs one by one as
    the compiler passes allocations, and handing them on to ``decode_all``
    as one tuple (a loop can index a tuple of one array type; a function
    cannot take a variable number of arrays otherwise)."""
    crops = ", ".join(f"crop_{k}" for k in range(count))
    source = (f"def decode(storage, offsets, sizes, heights, widths, modes, failed, decodes, index, {crops}, packed, "
              f"block, status, key, values):\n"
              f"    return decode_all(storage, offsets, sizes, heights, widths, modes, failed, decodes, index, "
              f"({crops},), packed, block, status, key, values)\n")
    namespace = {"decode_all": decode_all}
    exec(compile(source, f"<multi-crop decoder of {count} crops>", "exec"), namespace)
    return namespace["decode"]


def crop_layout(sizes: tuple[int, ...]) -> list[tuple[int, int]]:
    """(offset, bytes) of each square crop of side ``sizes[k]`` in the packed sample."""
    layout, offset = [], 0
    for side in sizes:
        layout.append((offset, side * side * 3))
        offset += side * side * 3
    return layout


@dataclasses.dataclass(frozen=True)
class MultiCrop(Declares, FieldOperation):
    """The decoding operation of multi-crop: crops of sides ``sizes``, crop
    ``k`` with area fraction in ``scales[k]``, all from one decode.  Use
    :func:`multi_crop_pipelines` to get the outputs wired."""

    sizes: tuple[int, ...] = param(Many(Int(1, 1 << 16)), "each crop's side, in pixels", structural=True)
    scales: tuple[tuple[float, float], ...] = param(Many(Pair(Float(0.0, 1.0, low_open=True))),
                                                    "each crop's range of area, as a fraction of the image's")
    ratio: tuple[float, float] = param(Pair(Float(0.0, low_open=True)),
                                       "range of every crop's aspect ratio, width / height, drawn log-uniformly",
                                       default=(3 / 4, 4 / 3))
    yoked: bool = param(Bool(), "every crop centred on the first's", default=False, structural=True)
    interpolation: str = param(Choice(tuple(INTERPOLATIONS), normalize=enum_name),
                               "how each region is resampled to its side", default="bilinear", structural=True)

    def __post_init__(self) -> None:
        if len(self.sizes) != len(self.scales):
            raise ArgumentError(f"MultiCrop: one scale range per crop size: {len(self.sizes)} sizes, "
                                f"{len(self.scales)} scales")

    def bind(self, source: DecodeSource, field: str) -> MultiCropDecoder:
        """The decoder this operation becomes when it is the first of ``field``'s pipeline."""
        return MultiCropDecoder(source, field, self)


def multi_crop_pipelines(global_crops: int = 2, global_size: int = 224, global_scale: tuple[float, float] = (0.4, 1.0),
                         local_crops: int = 6, local_size: int = 96, local_scale: tuple[float, float] = (0.05, 0.4),
                         flip: float = 0.5, mean: Any = (0.485, 0.456, 0.406), std: Any = (0.229, 0.224, 0.225),
                         dtype: Any = np.float16, yoked: bool = False, field: str = "image") -> dict[str, Any]:
    """Loader pipelines for multi-crop (DINO, SwAV): outputs ``global_0``..
    and ``local_0``.., each cropped from one decode of image field
    ``field``, flipped with probability ``flip`` and normalized to (3, side,
    side) ``dtype``."""
    from slipstream.compiler import Internal, Output, RefNode
    from slipstream.compiler.graph import View
    from slipstream.ops.augment import RandomHorizontalFlip
    from slipstream.ops.pack import Normalize

    sizes = (global_size,) * global_crops + (local_size,) * local_crops
    scales = (tuple(global_scale),) * global_crops + (tuple(local_scale),) * local_crops
    crops = Output("crops")  # the one decode every view reads, by this handle
    pipelines: dict[Any, Any] = {crops: Internal(View(field, [MultiCrop(sizes, scales, yoked=yoked)]))}
    names = [f"global_{k}" for k in range(global_crops)] + [f"local_{k}" for k in range(local_crops)]
    for k, name in enumerate(names):
        pipelines[name] = [RefNode(crops, output=f"crop_{k}"), RandomHorizontalFlip(flip),
                           Normalize(mean, std, dtype)]
    return pipelines
