"""Detection and segmentation: boxes, per-box values and masks that follow
every geometric transform of the image they belong to.

Every operation that moves an image's pixels (a decoding crop, a flip, a
translation) says where they went in its output ``transform``
(:mod:`slipstream.fields.geometry`).  The operations here read those
outputs, composed along the image's pipeline, and apply the same map; so a
sample's image, boxes and masks still come out of one fused, compiled loop::

    pipelines = {
        "image": [RandomIoUCrop(300, boxes="boxes"), RandomHorizontalFlip(), Normalize(mean, std)],
        "boxes": [BoundingBoxes(follow="image", center_inside=True)],   # (max_n, 4) float32, XYXY
        "labels": [KeptWithBoxes("boxes")],                             # (max_n,) the kept boxes' labels
        "counts": [Count("boxes")],                                     # () int64 boxes kept
        "masks": [InstanceMasks(follow="image", boxes="boxes")],        # (max_n, 300, 300) uint8
    }

Box coordinates follow ``torchvision.tv_tensors.BoundingBoxes``: absolute
pixel coordinates, ``XYXY`` unless ``format`` says otherwise.  Boxes are
stored as ``RaggedField(np.float32, (4,))`` rows in the stored image's
pixels; a box is clipped to the output, and dropped (with its labels, masks
and any other rows that follow it) when it keeps less than ``min_size``
pixels of width or height, less than ``min_visibility`` of its area, or,
with ``center_inside``, when its centre left the output (SSD's rule after
an IoU crop).  Batches hold ``max_n`` rows per sample, the most boxes any
sample of the dataset has (or ``max_boxes``), padded with zeros; ``Count``
gives how many are real, :class:`TrimToCounts` cuts a batch to its own
most, and :func:`unpad` turns a batch into the list of per-sample tensors
torchvision's detection models take.

Masks are nearest-neighbour resampled on the image's own pixel grid, so
that a mask pixel and an image pixel of one position always describe the
same point of the stored image.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import numbers
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from numba import uint64

from slipstream.compiler import Allocation, Decoder, DecoderNode, Geometry, Kind, Node, Operation, RefNode, State
from slipstream.compiler import astgen as A
from slipstream.compiler import random as rnd
from slipstream.compiler.jit import cached_njit
from slipstream.compiler.nodes import EmitContext, Finder, GraphNode, Input, normalize_declared
from slipstream.compiler.handles import FieldName, OutputRef
from slipstream.compiler.params import (FIELD_NAME, OUTPUT, PROBABILITY, Bool, Choice, Custom, Declares, Float, Int, Numbers,
                                        OrNone, Refused, packed_values, param)
from slipstream.compiler.rewrites import FieldOperation
from slipstream.errors import ArgumentError, PipelineError
from slipstream.fields import geometry
from slipstream.fields.decoders import DecodeSource
from slipstream.fields.ragged import COUNT, RaggedDecoder, RaggedField, longest
from slipstream.ops.crops import INTERPOLATION, SIZE, Crop, CropDecoder

KEPT = "kept"
"""The output of :class:`BoundingBoxes` that holds, per sample, the stored
row of each kept box (then -1): what the operations following the boxes select."""

FORMATS = ("XYXY", "XYWH", "CXCYWH")
"""Box formats, as ``torchvision.tv_tensors.BoundingBoxFormat`` names them."""

MAX_BOXES = 1 << 16
"""The most rows per sample ``BoundingBoxes(max_boxes=...)`` pads to."""


# ---------------------------------------------------------------- nodes that read other pipelines


@dataclasses.dataclass(frozen=True, eq=False)
class FollowingDecoder(Decoder):
    """A decoder that also reads outputs of other pipelines: the transforms
    of the geometric operations of pipeline ``follow``, composed, and the
    boxes kept by the :class:`BoundingBoxes` of pipeline ``boxes``.  Its
    compiled code is called as ``code(*inputs, index, [transforms],
    [kept, count], *outs, key, [values])``, with ``transforms`` a tuple of
    transform arrays when ``follow`` is set, ``kept``/``count`` when
    ``boxes`` is, and ``values`` when :meth:`runtime_values` is not None.

    It reads field ``field`` of ``source`` for the user's operation ``op``
    (a :class:`Following`): the structural arguments of ``op`` shape its
    code, and its values reach the code through :meth:`runtime_values`."""

    source: DecodeSource = dataclasses.field(repr=False)
    field: str
    op: Following

    def stored_field(self) -> str:
        """The field it decodes."""
        return self.field

    @property
    def follow(self) -> OutputRef | None:
        """The pipeline whose image's transforms it reads (None: none)."""
        return getattr(self.op, "follow", None)

    @property
    def boxes(self) -> OutputRef | None:
        """The pipeline whose kept boxes it selects from (None: none)."""
        return getattr(self.op, "boxes", None)

    def runtime_values(self) -> tuple[Any, ...] | None:
        """The values of ``op`` (:func:`~slipstream.compiler.params.packed_values`);
        None when it has none, and then the code takes no ``values``."""
        return packed_values(self.op) or None

    def declare_following(self, node: Followed) -> Any:
        """Output state and allocations, knowing the nodes it reads
        (``node.geometric`` and ``node.boxes_node``, declared already)."""
        raise NotImplementedError(f"{type(self).__name__} must implement declare_following()")

    def declare(self, state: State | None) -> Any:
        raise PipelineError(f"{self!r} reads other pipelines, so it is placed by its FollowingNode")


@dataclasses.dataclass(frozen=True)
class Followed:
    """What a :class:`FollowingDecoder` reads: the geometric nodes of the
    pipeline it follows, in order, and the node of the boxes it selects
    from (None when it selects none)."""

    geometric: tuple[GraphNode, ...]
    boxes_node: GraphNode | None

    @classmethod
    def of(cls, inputs: Sequence[Input]) -> Followed:
        """From a :class:`FollowingNode`'s inputs: the transforms it reads, then the kept boxes and their count."""
        boxes = [i.node for i in inputs if i.output == KEPT]
        return cls(tuple(i.node for i in inputs if i.output == geometry.TRANSFORM), boxes[0] if boxes else None)


class FollowingNode(DecoderNode):
    """The node of a :class:`FollowingDecoder`: its inputs are the composed
    transform of every geometric node of the pipeline it follows (their
    named outputs ``transform``), then the kept rows and count of the
    boxes it selects from, all passed to its code."""

    def __init__(self, op: FollowingDecoder) -> None:
        super().__init__(op)

    def reads(self, find: Finder) -> Sequence[Input]:
        op, inputs = self.op, []
        if op.follow is not None:
            followed = _followable(find, op.follow, self.describe())
            inputs += [find.node(op.follow, k).output(geometry.TRANSFORM) for k, n in enumerate(followed)
                       if n.geometry() is Geometry.MAPPED]
        if isinstance(op, BoxesDecoder):
            _refuse_unfiltered_rows(find, op)
        if op.boxes is not None:
            found = [k for k, n in enumerate(find.entries(op.boxes)) if isinstance(n.op, BoxesDecoder)]
            if not found:
                raise PipelineError(f"pipeline {find.pipeline!r}: {self.describe()} selects the boxes kept in "
                                    f"pipeline {op.boxes!r}, which has no BoundingBoxes")
            boxes = find.node(op.boxes, found[-1])
            inputs += [boxes.output(KEPT), boxes.output(COUNT)]
        return inputs

    def declared(self, inputs: Sequence[Input]) -> tuple[State, tuple[Allocation, ...]]:
        return normalize_declared(self.op.declare_following(Followed.of(inputs)))

    def emit(self, ctx: EmitContext) -> list[ast.stmt]:
        inputs = ctx.node.inputs
        args = [*ctx.arrays(), ctx.index]
        transforms = [ctx.value(k) for k, i in enumerate(inputs) if i.output == geometry.TRANSFORM]
        if transforms:
            args.append(A.tuple_of(transforms))
        args += [ctx.value(k) for k, i in enumerate(inputs) if i.output in (KEPT, COUNT)]
        args += [*ctx.outs(), ctx.key()]
        return [A.assign(ctx.target, ctx.call(*args))]


def _followable(find: Finder, pipeline: OutputRef, follower: str) -> list[Node]:
    """The entries of ``pipeline``, which ``follower`` (an entry of
    ``find.pipeline``) follows, once each has declared a geometry that can
    be followed (:class:`~slipstream.compiler.Geometry`): the first a
    decoder whose map sets the stored image's coordinates, every later one
    a mover of no pixel or a writer of its map."""
    followed = find.entries(pipeline)
    where = f"pipeline {find.pipeline!r}: {follower} follows pipeline {pipeline!r}"
    if followed[0].geometry() is not Geometry.MAPPED:
        raise PipelineError(f"{where}, which does not start with a geometric image decoder (a crop, Resize, or the "
                            f"image field's own decoder) but with {followed[0].describe()}")
    for entry in followed[1:]:
        declared = entry.geometry()
        if declared is Geometry.UNTRACKED:
            raise PipelineError(f"{where}, where {entry.describe()} moves pixels with no single map per sample (a "
                                f"mixture of differently warped images or of the batch's samples, a warp of batch "
                                f"tensors, or a geometric operation applied at random), so nothing can follow it; "
                                f"apply it in a pipeline without boxes, keypoints or masks, or use its per-sample "
                                f"form")
        if declared is Geometry.UNKNOWN:
            raise PipelineError(f"{where}, where {entry.describe()} does not declare how it moves pixels; declare "
                                f"`geometry = Geometry.IDENTITY` on its class if it moves none, or Geometry.MAPPED "
                                f"with an output named 'transform' holding each sample's map if it does "
                                f"(slipstream.compiler.Geometry, slipstream.fields.geometry); a torch module "
                                f"declares it by subclassing slipstream.compiler.DeclaresGeometry")
    return followed


def _refuse_unfiltered_rows(find: Finder, boxes: BoxesDecoder) -> None:
    """Refuse an output that reads a field with one row per box in full
    (its default decoder) while ``boxes`` (in pipeline ``find.pipeline``)
    drops boxes: its rows would no longer match the kept boxes."""
    box_lengths = _lengths(boxes.source, boxes.field)
    for name in find.names():
        op = find.entries(name)[0].op
        if (isinstance(op, RaggedDecoder) and op.source is boxes.source and op.field != boxes.field
                and box_lengths.any() and np.array_equal(_lengths(op.source, op.field), box_lengths)):
            raise PipelineError(f"output {name!r} reads field {op.field!r}, which holds a row per box, in full, "
                                f"while BoundingBoxes in pipeline {find.pipeline!r} drops boxes: its rows would not "
                                f"match the kept boxes; give it [KeptWithBoxes({find.pipeline!r})], or None to "
                                f"leave it out")


class Following(FieldOperation):
    """Base of the user-facing operations here: bound to a field, each
    becomes a :class:`FollowingNode` running its decoder."""

    def decoder(self, source: DecodeSource, field: str) -> FollowingDecoder:
        """The decoder of field ``field``."""
        raise NotImplementedError

    def bind(self, source: DecodeSource, field: str) -> FollowingNode:  # type: ignore[override]
        """The node this operation becomes as the first entry of ``field``'s pipeline."""
        return FollowingNode(self.decoder(source, field))


def _ragged(source: DecodeSource, field: str, inner_shape: tuple[int, ...] | None, what: str) -> RaggedField:
    stored = source.reader.fields[field]
    if not isinstance(stored, RaggedField) or (inner_shape is not None and stored.inner_shape != inner_shape):
        want = f"RaggedField(dtype, inner_shape={inner_shape})" if inner_shape is not None else "RaggedField"
        raise ArgumentError(f"{source.reader.path}: {what} reads field {field!r} as a {want}, but it is {stored!r}")
    return stored


def _lengths(source: DecodeSource, field: str) -> np.ndarray:
    return source.column(field, "length", np.int64)


def _stored(source: DecodeSource, field: str, kind: type, what: str) -> Any:
    """Field ``field``, which ``what`` reads as a ``kind``; else an ArgumentError saying what it is."""
    stored = source.reader.fields[field]
    if not isinstance(stored, kind):
        raise ArgumentError(f"{source.reader.path}: {what} reads field {field!r} as a {kind.__name__}, but it is "
                            f"{stored!r}")
    return stored


def _check_one_per_box(source: DecodeSource, field: str, node: Followed, rows: str) -> None:
    """Refuse a field that does not hold as many rows per sample as the boxes ``node`` selects from."""
    boxes = node.boxes_node.op
    mine, theirs = _lengths(source, field), _lengths(boxes.source, boxes.field)
    differ = np.flatnonzero(mine != theirs)
    if differ.size:
        i = int(differ[0])
        raise ValueError(f"{source.reader.path}: sample {i} has {mine[i]} {rows} in field {field!r} but {theirs[i]} "
                         f"boxes in field {boxes.field!r}: one per box is needed")


def _following_image(shape: tuple[int, ...], dtype: Any) -> tuple[State, list[Allocation]]:
    """The declaration of a value on the image's pixels: the value, and the composed transform."""
    return State(shape=shape, dtype=dtype), [Allocation(shape, dtype),
                                             Allocation((geometry.SIZE,), np.float64, name=geometry.TRANSFORM)]


# ---------------------------------------------------------------- boxes


@cached_njit
def _to_xyxy(a, b, c, d, stored):
    """A stored box as (x1, y1, x2, y2); ``stored`` indexes :data:`FORMATS`."""
    if stored == 1:
        return a, b, a + c, b + d
    if stored == 2:
        return a - c / 2, b - d / 2, a + c / 2, b + d / 2
    return a, b, c, d


@cached_njit
def _from_xyxy(x1, y1, x2, y2, fmt):
    """(x1, y1, x2, y2) in the format ``fmt`` indexes in :data:`FORMATS`."""
    if fmt == 1:
        return x1, y1, x2 - x1, y2 - y1
    if fmt == 2:
        return (x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1
    return x1, y1, x2, y2


@cached_njit
def copy_bytes(storage, start, nbytes, out):
    """Copy ``nbytes`` bytes from ``storage[start:]`` to the start of array
    ``out`` (C-contiguous): stored values need not be aligned, so they are
    read through an aligned copy."""
    dst = out.reshape(-1).view(np.uint8)
    start = uint64(start)
    for j in range(uint64(nbytes)):
        dst[j] = storage[start + j]


@dataclasses.dataclass(frozen=True, eq=False)
class BoxesDecoder(FollowingDecoder):
    """The decoder :class:`BoundingBoxes` binds to (see it); its code takes
    ``(min_size, min_visibility, center_inside)`` as ``values``."""

    op: BoundingBoxes

    def __post_init__(self) -> None:
        stored = _ragged(self.source, self.field, (4,), "BoundingBoxes")
        if stored.dtype != np.float32:
            raise ArgumentError(f"{self.source.reader.path}: BoundingBoxes reads float32 boxes; field "
                                f"{self.field!r} stores {stored.dtype} (write it as RaggedField(np.float32, (4,)))")
        most, sample = longest(self.source, self.field)
        max_boxes = self.op.max_boxes
        if max_boxes is not None and most > max_boxes:
            raise ArgumentError(f"{self.source.reader.path}: sample {sample} has {most} boxes in field "
                                f"{self.field!r}, more than max_boxes={max_boxes}; raise max_boxes (None pads "
                                f"to the dataset's most boxes)")

    @property
    def rows(self) -> int:
        """The padded number of boxes per sample."""
        max_boxes = self.op.max_boxes
        return max_boxes if max_boxes is not None else max(longest(self.source, self.field)[0], 1)

    def inputs(self) -> tuple[np.ndarray, ...]:
        return (self.source.storage, self.source.offsets(self.field), _lengths(self.source, self.field))

    def declare_following(self, node: Followed) -> list[Allocation] | Any:
        max_n = self.rows
        return State(shape=(max_n, 4), dtype=np.float32), [
            Allocation((max_n, 4), np.float32), Allocation((), np.int64, name=COUNT),
            Allocation((max_n,), np.int64, name=KEPT),
            Allocation((geometry.SIZE,), np.float64, name=geometry.TRANSFORM)]

    def generate_code(self):
        fmt, stored_fmt = FORMATS.index(self.op.format), FORMATS.index(self.op.stored_format)
        compose, map_box, box_through = geometry.compose, geometry.map_box, geometry.box_through
        out_rows, out_cols, axis_aligned = geometry.OUT_H, geometry.OUT_W, geometry.is_axis_aligned_chain

        def boxes(storage, offsets, lengths, index, transforms, out, count, kept, transform, key, values):
            min_size, min_visibility, center_inside = values
            t = compose(transforms, transform)
            out_h, out_w = t[out_rows], t[out_cols]
            stagewise = not axis_aligned(transforms)
            n, m = lengths[index], 0
            copy_bytes(storage, offsets[index], n * 16, out)  # then moved, filtered and compacted in place
            for r in range(n):
                sx1, sy1, sx2, sy2 = _to_xyxy(out[r, 0], out[r, 1], out[r, 2], out[r, 3], stored_fmt)
                x1, y1, x2, y2 = map_box(t, sx1, sy1, sx2, sy2)
                area = (x2 - x1) * (y2 - y1)
                cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
                if stagewise:  # what a crop cut off stays cut off after a warp
                    x1, y1, x2, y2 = box_through(transforms, sx1, sy1, sx2, sy2)
                x1, x2 = min(max(x1, 0.0), out_w), min(max(x2, 0.0), out_w)
                y1, y2 = min(max(y1, 0.0), out_h), min(max(y2, 0.0), out_h)
                # written so that a box with a NaN coordinate fails every test and is dropped
                if not (x2 - x1 >= min_size and y2 - y1 >= min_size):
                    continue
                if not ((x2 - x1) * (y2 - y1) >= min_visibility * area):
                    continue
                if center_inside and not (0.0 < cx < out_w and 0.0 < cy < out_h):
                    continue
                out[m, 0], out[m, 1], out[m, 2], out[m, 3] = _from_xyxy(x1, y1, x2, y2, fmt)
                kept[m] = r
                m += 1
            out[m:] = 0.0
            kept[m:] = -1
            count[0] = m
            return out

        return boxes


@dataclasses.dataclass(frozen=True)
class BoundingBoxes(Declares, Following):
    """Boxes that follow the image of pipeline ``follow``: each stored box
    (``RaggedField(np.float32, (4,))`` rows in the stored image's pixels,
    ``stored_format``) is moved by the image's transforms, clipped to the
    output image, and kept when it holds at least ``min_size`` pixels of
    width and height (torchvision's ``SanitizeBoundingBoxes``), at least
    ``min_visibility`` of its moved area, and, with ``center_inside``, its
    centre inside the output.  Gives ``(max_n, 4)`` float32 boxes in
    ``format`` (absolute pixels, as ``torchvision.tv_tensors.BoundingBoxFormat``;
    kept boxes first, then zeros; ``max_n`` rows, see ``max_boxes``), and
    the outputs ``count`` (kept boxes, int64) and ``kept`` (the stored row
    of each kept box, then -1) that :class:`KeptWithBoxes`,
    :class:`InstanceMasks` and :class:`Count` read."""

    follow: OutputRef = param(OUTPUT, "the output whose image the boxes belong to", default="image", structural=True)
    format: str = param(Choice(FORMATS), "output format, absolute pixels", default="XYXY", structural=True)
    stored_format: str = param(Choice(FORMATS), "the format of the stored boxes", default="XYXY", structural=True)
    min_size: float = param(Float(0.0), "smallest width and height of a kept box after clipping, in output pixels",
                            default=1.0)
    min_visibility: float = param(PROBABILITY, "smallest fraction of its moved area a kept box keeps inside the image",
                                  default=0.0)
    center_inside: bool = param(Bool(), "drop boxes whose centre left the image", default=False)
    max_boxes: int | None = param(OrNone(Int(1, MAX_BOXES)),
                                  "rows per sample (`max_n`), a fixed shape for any dataset; `None`: the dataset's "
                                  "most boxes. A dataset with a sample holding more is refused", default=None,
                                  structural=True)

    def decoder(self, source: DecodeSource, field: str) -> BoxesDecoder:
        """The decoder of field ``field``."""
        return BoxesDecoder(source, field, self)


# ---------------------------------------------------------------- what follows the kept boxes


@dataclasses.dataclass(frozen=True, eq=False)
class _KeptRowsDecoder(FollowingDecoder):
    op: KeptWithBoxes

    def __post_init__(self) -> None:
        stored = _ragged(self.source, self.field, None, "KeptWithBoxes")
        fill, dtype = self.op.fill, stored.dtype
        if isinstance(fill, bool):  # a bool is no number: it fills bool rows only
            fits = dtype == np.bool_
        else:
            fits = np.can_cast(np.min_scalar_type(fill), dtype, "same_kind") or \
                (dtype == np.bool_ and fill in (0, 1))  # flags padded with 0 (False) or 1, as torch takes
            try:
                fits = fits and dtype.type(fill) == fill
            except OverflowError:
                fits = False
        if not fits:
            raise ArgumentError(f"KeptWithBoxes: fill {fill!r} does not fit the {dtype} rows of field "
                                f"{self.field!r}")

    def inputs(self) -> tuple[np.ndarray, ...]:
        return (self.source.storage, self.source.offsets(self.field), _lengths(self.source, self.field))

    def declare_following(self, node: Followed) -> Any:
        _check_one_per_box(self.source, self.field, node, "rows")
        stored = self.source.reader.fields[self.field]
        shape = (node.boxes_node.state.shape[0], *stored.inner_shape)
        return State(shape=shape, dtype=stored.dtype), Allocation(shape, stored.dtype)

    def runtime_values(self) -> tuple[np.ndarray]:
        """A padding row, ``fill`` in the field's dtype, as its bytes (uint8,
        whatever the dtype: float16 and bool rows alike)."""
        stored = self.source.reader.fields[self.field]
        row = np.full(stored.inner_shape, self.op.fill, stored.dtype)
        return (np.frombuffer(row.tobytes(), np.uint8).copy(),)

    def generate_code(self):
        row_bytes = uint64(self.source.reader.fields[self.field].row_bytes)

        def rows(storage, offsets, lengths, index, kept, count, out, key, values):
            (padding,) = values
            start, n = uint64(offsets[index]), count[0]
            dst = out.reshape(-1).view(np.uint8)
            for k in range(n):
                src, base = start + uint64(kept[k]) * row_bytes, uint64(k) * row_bytes
                for j in range(row_bytes):
                    dst[base + j] = storage[src + j]
            for k in range(n, out.shape[0]):
                base = uint64(k) * row_bytes
                for j in range(row_bytes):
                    dst[base + j] = padding[j]
            return out

        return rows


def _row_fill(value: Any) -> int | float | bool:
    """:class:`KeptWithBoxes`'s ``fill``: a finite number (an int kept as
    an int, so that an int64 label keeps every digit) or a bool (for bool
    rows)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    return Float().accept(value)


@dataclasses.dataclass(frozen=True)
class KeptWithBoxes(Declares, Following):
    """The rows of a ``RaggedField`` with one row per box (labels, crowd
    flags, scores) for the boxes that :class:`BoundingBoxes` of pipeline
    ``boxes`` kept, in its order; the rest of the ``(max_n, ...)`` sample
    is ``fill`` (for bool rows, 0 or 1 stand for False and True)."""

    boxes: OutputRef = param(OUTPUT, "the output whose `BoundingBoxes` decides which rows are kept", default="boxes",
                       structural=True)
    fill: int | float | bool = param(Custom(_row_fill, "a number, or a bool for bool rows", bad=(
        math.nan, math.inf, -math.inf, "0", b"0", None, [0], {0: 0}), good=0),
        "the value of the padding rows, which the field's dtype must hold (for bool rows, 0 or 1: False or True)",
        default=0)

    def decoder(self, source: DecodeSource, field: str) -> _KeptRowsDecoder:
        """The decoder of field ``field``."""
        return _KeptRowsDecoder(source, field, self)


@dataclasses.dataclass(frozen=True, eq=False)
class _KeypointsDecoder(FollowingDecoder):
    op: Keypoints

    def __post_init__(self) -> None:
        stored = _stored(self.source, self.field, RaggedField, "Keypoints")
        if len(stored.inner_shape) != 2 or stored.inner_shape[1] != 3 or stored.dtype != np.float32:
            raise ArgumentError(f"{self.source.reader.path}: Keypoints reads field {self.field!r} as "
                                f"RaggedField(np.float32, (K, 3)) rows of (x, y, visibility), but it is {stored!r}")
        flip = self.op.flip_indices
        if flip is not None and len(flip) != stored.inner_shape[0]:
            raise ArgumentError(f"Keypoints: flip_indices must order the {stored.inner_shape[0]} keypoints of field "
                                f"{self.field!r}, got {flip}")

    def inputs(self) -> tuple[np.ndarray, ...]:
        return (self.source.storage, self.source.offsets(self.field), _lengths(self.source, self.field))

    def declare_following(self, node: Followed) -> Any:
        _check_one_per_box(self.source, self.field, node, "keypoint rows")
        return _following_image((node.boxes_node.state.shape[0], self._points(), 3), np.float32)

    def runtime_values(self) -> tuple[np.ndarray]:
        """Where each point of a mirrored image comes from (int64; in place
        without ``flip_indices``)."""
        flip = self.op.flip_indices
        return (np.array(flip if flip is not None else range(self._points()), np.int64),)

    def _points(self) -> int:
        """K, the points per box."""
        return self.source.reader.fields[self.field].inner_shape[0]

    def generate_code(self):
        points = self._points()
        row_bytes, compose, map_point = uint64(points * 12), geometry.compose, geometry.map_point
        determinant, out_rows, out_cols = geometry.determinant, geometry.OUT_H, geometry.OUT_W
        axis_aligned, survives = geometry.is_axis_aligned_chain, geometry.point_survives

        def keypoints(storage, offsets, lengths, index, transforms, kept, count, out, transform, key, values):
            (order,) = values
            t = compose(transforms, transform)
            out_h, out_w = t[out_rows], t[out_cols]
            n, start = count[0], uint64(offsets[index])
            mirrored = determinant(t) < 0  # an odd number of flips: left and right trade places
            stagewise = not axis_aligned(transforms)
            for k in range(n):  # the kept rows first, in the boxes' order ...
                copy_bytes(storage, start + uint64(kept[k]) * row_bytes, row_bytes, out[k])
            for k in range(n):  # ... then moved, and reordered when the image was mirrored
                row = out[k].copy() if mirrored else out[k]
                for p in range(points):
                    source = order[p] if mirrored else p
                    (x, y), v = map_point(t, row[source, 0], row[source, 1]), row[source, 2]
                    if stagewise and not survives(transforms, row[source, 0], row[source, 1]):
                        v = 0.0
                    if v > 0 and 0.0 <= x <= out_w and 0.0 <= y <= out_h:
                        out[k, p, 0], out[k, p, 1], out[k, p, 2] = x, y, v
                    else:  # not labelled, or left out of the image: (0, 0, 0), as COCO writes unlabelled points
                        out[k, p, 0], out[k, p, 1], out[k, p, 2] = 0.0, 0.0, 0.0
            out[n:] = 0.0
            return out

        return keypoints


MAX_POINTS = 1 << 12
"""The most keypoints per box ``Keypoints(flip_indices=...)`` orders."""


def _permutation(value: Any) -> tuple[int, ...]:
    """:class:`Keypoints`'s ``flip_indices``: the numbers 0 to K - 1, each
    once, in any order (K at most :data:`MAX_POINTS`), kept as a tuple of ints."""
    if isinstance(value, np.ndarray) and value.ndim != 1 or not isinstance(value, (Sequence, np.ndarray)) or \
            isinstance(value, (str, bytes)) or not 1 <= len(value) <= MAX_POINTS:
        raise Refused()
    order = tuple(Int(0, len(value) - 1).accept(i) for i in value)
    if len(set(order)) != len(order):
        raise Refused("an index repeated")
    return order


@dataclasses.dataclass(frozen=True)
class Keypoints(Declares, Following):
    """The keypoints of the boxes :class:`BoundingBoxes` of pipeline
    ``boxes`` kept, moved with the image of pipeline ``follow``: a
    ``RaggedField(np.float32, (K, 3))`` with one row of K ``(x, y,
    visibility)`` points per box, as COCO's keypoints.  A point the image
    left out, or one stored unlabelled (visibility 0), comes out as (0, 0,
    0), as COCO writes unlabelled points.  When the image was mirrored (an
    odd number of flips), ``flip_indices`` (K indices, for COCO's person
    keypoints the left and right of each pair swapped) reorders the points
    so that a "left eye" stays the left eye.  Gives ``(max_n, K, 3)`` float32, kept boxes first."""

    follow: OutputRef = param(OUTPUT, "the output whose image the keypoints belong to", default="image",
                        structural=True)
    boxes: OutputRef = param(OUTPUT, "the output whose `BoundingBoxes` decides which rows are kept", default="boxes",
                       structural=True)
    flip_indices: tuple[int, ...] | None = param(
        OrNone(Custom(_permutation, f"the K indices 0 to K - 1 in any order (K <= {MAX_POINTS})",
                      bad=((0, 0), (1, 2), (0, -1), (0.0, 1.0), (True, False), (0, math.nan), (), "01", 3, 1.5,
                           [[0, 1]], {0: 0}), good=(1, 0))),
        "the order of the points after a left-right mirror (left and right swapped)", default=None)

    def decoder(self, source: DecodeSource, field: str) -> _KeypointsDecoder:
        """The decoder of field ``field``."""
        return _KeypointsDecoder(source, field, self)


class Count(RefNode):
    """How many boxes :class:`BoundingBoxes` of pipeline ``boxes`` kept, per
    sample (int64): an output of its own, ``"counts": [Count("boxes")]``."""

    def __init__(self, boxes: OutputRef = "boxes") -> None:
        super().__init__(boxes, None, output=COUNT)

    def reads(self, find: Finder) -> Sequence[Input]:
        found = [k for k, n in enumerate(find.entries(self.source_pipeline)) if isinstance(n.op, BoxesDecoder)]
        if not found:
            raise PipelineError(f"pipeline {find.pipeline!r} counts the boxes of pipeline {self.source_pipeline!r}, "
                                f"which has no BoundingBoxes")
        return (find.node(self.source_pipeline, found[-1]).output(COUNT),)

    def describe(self) -> str:
        """``Count('boxes')``."""
        return f"Count({self.source_pipeline!r})"

    def __repr__(self) -> str:
        return self.describe()


@dataclasses.dataclass(frozen=True)
class _Trim(Operation):
    kind: ClassVar[Kind] = Kind.TORCH

    def declare(self, state: State) -> Any:
        return state, None

    def generate_code(self):
        def trim(values: Any, counts: Any) -> Any:
            return values[:, :int(counts.max()) if len(counts) else 0]

        return trim


class TrimToCounts(Node):
    """The batch's own padding instead of the dataset's: a padded batch
    (boxes, labels, masks, ``(B, max_n, ...)``) cut to ``(B, m, ...)``, with
    ``m`` the most rows a sample of this batch kept, as the output
    ``counts`` counts them (a view, no copy; in the torch stage).  Place it
    last in the pipelines of the padded outputs."""

    def __init__(self, counts: OutputRef = "counts") -> None:
        super().__init__(_Trim())
        self.counts_pipeline = counts

    def reads(self, find: Finder) -> Sequence[Input]:
        """The padded values before it, and the counts."""
        return (find.previous().output(), find.last(self.counts_pipeline).output())

    def emit_torch(self, ctx: EmitContext) -> list[ast.stmt]:
        return [A.assign(ctx.target, A.call(ctx.code(), ctx.batch_value(0), ctx.batch_value(1)))]

    def describe(self) -> str:
        """``TrimToCounts('counts')``."""
        return f"TrimToCounts({self.counts_pipeline!r})"

    def __repr__(self) -> str:
        return self.describe()


def unpad(values: Any, counts: Any) -> list[Any]:
    """A padded batch (``(B, max_n, ...)``, a tensor or an array) as the list
    of each sample's first ``counts[i]`` rows (views, no copies): the
    per-sample targets torchvision's detection models take."""
    return [values[i, :n] for i, n in enumerate(counts.tolist())]


# ---------------------------------------------------------------- masks


@dataclasses.dataclass(frozen=True, eq=False)
class _MaskDecoder(FollowingDecoder):
    can_fail: ClassVar[bool] = True  # a corrupt mask: its status after the outs, as an image decoder's

    def inputs(self) -> tuple[np.ndarray, ...]:
        source, field = self.source, self.field
        return (source.storage, source.offsets(field), source.sizes(field), source.column(field, "height", np.int64),
                source.column(field, "width", np.int64), source.known)

    def output_size(self, node: Followed) -> tuple[int, int]:
        """The (height, width) of the image followed (its last geometric
        operation's output), once the masks are known to have the stored
        images' sizes."""
        image = node.geometric[0].op  # the image field's decoder: the stored pixels the masks must cover
        masks = self.source.records(self.field, "every mask's size")
        images = image.source.records(image.field, "every image's size")
        differ = np.flatnonzero((masks["height"] != images["height"]) | (masks["width"] != images["width"]))
        if differ.size:
            i = int(differ[0])
            raise ValueError(f"{self.source.reader.path}: sample {i}'s mask in field {self.field!r} is "
                             f"{masks['height'][i]}x{masks['width'][i]}, but its image in field {image.field!r} is "
                             f"{images['height'][i]}x{images['width'][i]}: masks must have their image's size")
        shape = node.geometric[-1].state.shape
        if len(shape) != 3:
            raise ValueError(f"follows {node.geometric[-1].describe()}, whose output {shape} is not an image")
        return int(shape[0]), int(shape[1])


@dataclasses.dataclass(frozen=True, eq=False)
class _SegmentationDecoder(_MaskDecoder):
    op: SegmentationMask

    def __post_init__(self) -> None:
        from slipstream.fields.masks import SegmentationMaskField

        stored = _stored(self.source, self.field, SegmentationMaskField, "SegmentationMask")
        fill = self.fill
        if not 0 <= fill <= np.iinfo(stored.dtype).max:
            what = "" if self.op.fill is not None else " (the dataset's ignore_index)"
            raise ArgumentError(f"SegmentationMask: fill {fill}{what} does not fit the {stored.dtype} masks of "
                                f"field {self.field!r}")

    @property
    def fill(self) -> int:
        """The class of the pixels that show no stored pixel: the
        operation's ``fill``, else the dataset's ``ignore_index``, else the
        dtype's largest value."""
        fill = self.op.fill
        if fill is None:
            fill = self.source.reader.user_metadata.get("ignore_index")
        if fill is None:
            fill = np.iinfo(self.source.reader.fields[self.field].dtype).max
        return int(fill)

    def runtime_values(self) -> tuple[np.integer]:
        """The fill, in the masks' dtype."""
        return (self.source.reader.fields[self.field].dtype.type(self.fill),)

    def declare_following(self, node: Followed) -> Any:
        return _following_image(self.output_size(node), self.source.reader.fields[self.field].dtype)

    def generate_code(self):
        from slipstream.fields.masks import decode_mask

        compose = geometry.compose
        axis_aligned, uncovered = geometry.is_axis_aligned_chain, geometry.uncovered

        def mask(storage, offsets, sizes, heights, widths, failed, index, transforms, out, transform, status, key,
                 values):
            (fill,) = values
            t = compose(transforms, transform)
            start, size = uint64(offsets[index]), uint64(sizes[index])
            outcome = np.int32(failed)  # the sample's known failure status
            if outcome == 0:
                outcome = np.int32(decode_mask(storage[start:start + size], heights[index], widths[index], t, out,
                                               fill))
            if outcome == 0 and not axis_aligned(transforms):
                clear(uncovered(transforms), out, fill)
            status[0] = outcome
            if outcome != 0:
                out[:] = fill
            return out

        return mask


@dataclasses.dataclass(frozen=True)
class SegmentationMask(Declares, Following):
    """A ``SegmentationMaskField`` (one class per pixel) resampled with
    nearest neighbour onto the pixels of the image of pipeline ``follow``:
    (height, width) of the field's dtype, ``fill`` where the image shows
    no stored pixel.  ``fill=None`` takes the dataset's ``ignore_index``
    (its user metadata, as ``SegmentationFolder`` writes it), else the
    largest value of the field's dtype (255 for uint8 masks, the usual
    "ignore" class).  A ``fill`` that is not an int (a float, a bool) is
    refused."""

    follow: OutputRef = param(OUTPUT, "the output whose image the mask belongs to", default="image", structural=True)
    fill: int | None = param(OrNone(Int(0, 65535)),
                             "the class of output pixels that show no stored pixel; `None`: the dataset's "
                             "`ignore_index` (user metadata, as `SegmentationFolder(ignore_index=)` writes it), else "
                             "the dtype's largest value (255 for uint8, the usual \"ignore\"); it must fit the "
                             "masks' dtype", default=None)

    def decoder(self, source: DecodeSource, field: str) -> _SegmentationDecoder:
        """The decoder of field ``field``."""
        return _SegmentationDecoder(source, field, self)


@dataclasses.dataclass(frozen=True, eq=False)
class _InstancesDecoder(_MaskDecoder):
    op: InstanceMasks

    def __post_init__(self) -> None:
        from slipstream.fields.masks import InstanceMasksField

        _stored(self.source, self.field, InstanceMasksField, "InstanceMasks")

    def inputs(self) -> tuple[np.ndarray, ...]:
        return (*super().inputs(), _lengths(self.source, self.field))

    def declare_following(self, node: Followed) -> Any:
        _check_one_per_box(self.source, self.field, node, "masks")
        return _following_image((node.boxes_node.state.shape[0], *self.output_size(node)), np.uint8)

    def generate_code(self):
        from slipstream.fields.masks import decode_instances

        compose, axis_aligned, uncovered = geometry.compose, geometry.is_axis_aligned_chain, geometry.uncovered

        def masks(storage, offsets, sizes, heights, widths, failed, lengths, index, transforms, kept, count, out,
                  transform, status, key):
            t = compose(transforms, transform)
            start, size = uint64(offsets[index]), uint64(sizes[index])
            outcome = np.int32(failed)  # the sample's known failure status
            if outcome == 0:
                outcome = np.int32(decode_instances(storage[start:start + size], heights[index], widths[index],
                                                    lengths[index], kept, count[0], t, out))
            if outcome == 0 and not axis_aligned(transforms):
                gone = uncovered(transforms)
                for k in range(count[0]):
                    clear(gone, out[k], 0)
            status[0] = outcome
            if outcome != 0:
                out[:] = 0
            return out

        return masks


@dataclasses.dataclass(frozen=True)
class InstanceMasks(Declares, Following):
    """The instance masks (an ``InstanceMasksField``, one per box) of the
    boxes :class:`BoundingBoxes` of pipeline ``boxes`` kept, resampled with
    nearest neighbour onto the pixels of the image of pipeline ``follow``:
    ``(max_n, height, width)`` uint8, 1 inside an instance, the masks of
    kept boxes first, then zeros."""

    follow: OutputRef = param(OUTPUT, "the output whose image the masks belong to", default="image", structural=True)
    boxes: OutputRef = param(OUTPUT, "the output whose `BoundingBoxes` decides which instances are kept",
                       default="boxes", structural=True)

    def decoder(self, source: DecodeSource, field: str) -> _InstancesDecoder:
        """The decoder of field ``field``."""
        return _InstancesDecoder(source, field, self)


@cached_njit
def clear(gone, out, fill):
    """Set to ``fill`` the pixels of the 2-D ``out`` where ``gone`` is True:
    those an earlier stage cut off (:func:`geometry.uncovered`)."""
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            if gone[i, j]:
                out[i, j] = fill


# ---------------------------------------------------------------- SSD's IoU crop


@cached_njit
def iou_crop_params(key, height, width, boxes, n, options, min_scale, max_scale, min_ratio, max_ratio,
                    trials, rounds):
    """SSD's crop (torchvision.transforms.v2.RandomIoUCrop) for an image with
    the ``n`` XYXY ``boxes``: draw a minimum
    IoU from ``options`` (1 or more: no crop), then up to ``trials`` crops
    whose sides are ``min_scale``..``max_scale`` of the image's and whose
    aspect ratio lies in [min_ratio, max_ratio], at a uniform position; the
    first that holds the centre of a box and overlaps one such box with at
    least the minimum IoU is taken.  After ``rounds`` draws of the minimum
    without a crop (and for an image without boxes), the whole image.
    Returns (top, left, h, w)."""
    if n == 0:
        return 0, 0, height, width
    trial = 0  # over all rounds
    for r in range(rounds):
        min_iou = options[rnd.integers(key, _IOU_DRAWS.min_iou + r, 0, len(options))]
        if min_iou >= 1.0:
            return 0, 0, height, width
        for _ in range(trials):
            u = (rnd.uniform(key, _IOU_DRAWS.crop_width + trial), rnd.uniform(key, _IOU_DRAWS.crop_height + trial),
                 rnd.uniform(key, _IOU_DRAWS.crop_left + trial), rnd.uniform(key, _IOU_DRAWS.crop_top + trial))
            trial += 1
            w = int(width * (min_scale + (max_scale - min_scale) * u[0]))
            h = int(height * (min_scale + (max_scale - min_scale) * u[1]))
            if w < 1 or h < 1 or not min_ratio <= w / h <= max_ratio:
                continue
            left, top = int((width - w) * u[2]), int((height - h) * u[3])
            right, bottom = left + w, top + h
            best, centred = -1.0, False
            for r in range(n):
                x1, y1, x2, y2 = boxes[r, 0], boxes[r, 1], boxes[r, 2], boxes[r, 3]
                cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
                if not (left < cx < right and top < cy < bottom):
                    continue
                centred = True
                iw = min(x2, right) - max(x1, left)
                ih = min(y2, bottom) - max(y1, top)
                inter = max(iw, 0.0) * max(ih, 0.0)
                union = (x2 - x1) * (y2 - y1) + w * h - inter
                best = max(best, inter / union if union > 0 else 0.0)
            if centred and best >= min_iou:
                return top, left, h, w
    return 0, 0, height, width


# The key is also the flip's (the crop decoder's): naming it here checks that no IoU draw overlaps it.
_IOU_DRAWS = rnd.named_draws("min_iou", "crop_width", "crop_height", "crop_left", "crop_top", "flip")


@dataclasses.dataclass(frozen=True, eq=False)
class _IoUCropDecoder(CropDecoder):
    """A :class:`CropDecoder` whose region also reads the sample's boxes,
    through a per-sample copy of them (its third allocation)."""

    def inputs(self) -> tuple[np.ndarray, ...]:
        boxes = self.crop.boxes
        stored = _ragged(self.source, boxes, (4,), "RandomIoUCrop")
        if stored.dtype != np.float32:
            raise ArgumentError(f"{self.source.reader.path}: RandomIoUCrop reads float32 boxes; field {boxes!r} "
                                f"stores {stored.dtype}")
        return (*super().inputs(), self.source.offsets(boxes), _lengths(self.source, boxes))

    def declare(self, state: State | None) -> tuple[State, list[Allocation]]:
        image, memory = super().declare(state)
        most = max(longest(self.source, self.crop.boxes)[0], 1)
        return image, [*memory, Allocation((most, 4), np.float32)]

    def generate_code(self):
        decode_region, stored_fmt = self.region_decoder(), FORMATS.index(self.crop.stored_format)

        def decode(storage, offsets, sizes, heights, widths, modes, failed, decodes, box_offsets, box_lengths,
                   index, out, transform, boxes, status, key, values):
            flip_p, (options, lo, hi, rlo, rhi, trials, rounds) = values
            n = box_lengths[index]
            copy_bytes(storage, box_offsets[index], n * 16, boxes)
            for r in range(n):
                boxes[r, 0], boxes[r, 1], boxes[r, 2], boxes[r, 3] = _to_xyxy(boxes[r, 0], boxes[r, 1], boxes[r, 2],
                                                                          boxes[r, 3], stored_fmt)
            y, x, h, w = iou_crop_params(key, heights[index], widths[index], boxes, n, options, lo, hi, rlo, rhi,
                                         trials, rounds)
            return decode_region(storage, offsets, sizes, heights, widths, modes, failed, decodes, index, out,
                                 transform, status, key, y, x, h, w, flip_p)

        return decode


@dataclasses.dataclass(frozen=True)
class RandomIoUCrop(Crop):
    """SSD's random crop with a minimum IoU against the sample's boxes
    (torchvision.transforms.v2's ``RandomIoUCrop``, see
    :func:`iou_crop_params`), resized to ``size`` (SSD's fixed square input).
    The boxes are read from field ``boxes`` (``RaggedField(np.float32,
    (4,))`` in the stored image's pixels, ``stored_format``).  Follow the boxes with
    ``BoundingBoxes(follow=..., center_inside=True)``, which drops the boxes
    whose centre the crop left out, as torchvision does.  Starts an image
    field's pipeline."""

    size: int | tuple[int, int] = param(SIZE, "output (height, width) in pixels, or one int for a square",
                                        structural=True)
    boxes: FieldName = param(FIELD_NAME, "the box field (`RaggedField(np.float32, (4,))`) the crop must overlap",
                       default="boxes", structural=True)
    min_scale: float = param(Float(0.0, 1.0, low_open=True),
                             "smallest side of the crop, as a fraction of the image's side", default=0.3)
    max_scale: float = param(Float(0.0, 1.0, low_open=True),
                             "largest side of the crop, as a fraction of the image's side", default=1.0)
    min_aspect_ratio: float = param(Float(0.0, low_open=True), "smallest width / height of the crop", default=0.5)
    max_aspect_ratio: float = param(Float(0.0, low_open=True), "largest width / height of the crop", default=2.0)
    sampler_options: tuple[float, ...] = param(Numbers(Float(0.0)),
                                               "minimum IoUs to draw from; 1 or more means the whole image",
                                               default=(0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 2.0))
    trials: int = param(Int(1, 1 << 20), "crops tried per drawn minimum IoU", default=40)
    rounds: int = param(Int(1, 1 << 20), "minimum IoUs drawn before the whole image is taken", default=50)
    stored_format: str = param(Choice(FORMATS), "the format of the stored boxes", default="XYXY", structural=True)
    interpolation: str = param(INTERPOLATION, "how the region is resampled to the output size",
                               default="bilinear", structural=True)
    flip_p: float = param(PROBABILITY, "probability of a left-right mirror (a following `RandomHorizontalFlip` "
                                       "sets it)", default=0.0)

    def __post_init__(self) -> None:
        if self.min_scale > self.max_scale:
            raise ArgumentError(f"RandomIoUCrop: min_scale must be <= max_scale, got {self.min_scale}, "
                                f"{self.max_scale}")
        if self.min_aspect_ratio > self.max_aspect_ratio:
            raise ArgumentError(f"RandomIoUCrop: min_aspect_ratio must be <= max_aspect_ratio, got "
                                f"{self.min_aspect_ratio}, {self.max_aspect_ratio}")

    @property
    def output_size(self) -> tuple[int, int]:
        """The (height, width) of the decoded samples."""
        return self.size

    def region_values(self) -> tuple[Any, ...]:
        """What :func:`iou_crop_params` takes besides the sample: the minimum
        IoUs, the scale and aspect ranges, trials and rounds."""
        return (np.array(self.sampler_options, np.float64), self.min_scale, self.max_scale, self.min_aspect_ratio,
                self.max_aspect_ratio, self.trials, self.rounds)

    def region(self) -> Any:
        """Refused: the region depends on the boxes as well (see :class:`_IoUCropDecoder`)."""
        raise NotImplementedError("RandomIoUCrop's region reads the sample's boxes: bind it to an image field")

    def bind(self, source: DecodeSource, field: str) -> CropDecoder:
        """The decoder this operation becomes when it is the first of ``field``'s pipeline."""
        return _IoUCropDecoder(source, field, self)
