"""Boxes and masks follow the image: geometry checked against the decoded
pixels of generated images whose shapes are known.

Each image holds a few shapes (rectangles and ellipses) of distinct, pure
colours on black, none overlapping; its boxes are the shapes' exact extents
and its masks their pixels.  After a pipeline's random crops, flips, resizes
and shifts, every kept box must still bound the pixels of its shape's
colour in the decoded image, and every mask must coincide with them.
"""

from __future__ import annotations

import io
import re
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

import slipstream as ss
from slipstream.fields import geometry
from slipstream.ops import (
    BoundingBoxes,
    CenterCrop,
    Count,
    InstanceMasks,
    KeptWithBoxes,
    Keypoints,
    RandomCrop,
    RandomHorizontalFlip,
    RandomIoUCrop,
    RandomResizedCrop,
    RandomTranslate,
    RandomVerticalFlip,
    Resize,
    SegmentationMask,
    unpad,
)

COLOURS = np.array([(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (0, 255, 255), (255, 0, 255)], np.uint8)


def shapes_image(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """An image with up to 6 shapes in a 3 x 2 grid of cells: (pixels,
    XYXY boxes, labels = colour index + 1, instance masks (n, H, W))."""
    height, width = int(rng.integers(160, 360)), int(rng.integers(160, 360))
    image = np.zeros((height, width, 3), np.uint8)
    yy, xx = np.mgrid[:height, :width]
    boxes, labels, masks = [], [], []
    cell_h, cell_w = height // 2, width // 3
    for k in rng.permutation(6)[:int(rng.integers(1, 7))]:
        top, left = (k // 3) * cell_h, (k % 3) * cell_w
        h, w = int(rng.integers(cell_h // 3, cell_h - 4)), int(rng.integers(cell_w // 3, cell_w - 4))
        y0, x0 = top + int(rng.integers(2, cell_h - h - 1)), left + int(rng.integers(2, cell_w - w - 1))
        if rng.random() < 0.5:
            mask = (yy >= y0) & (yy < y0 + h) & (xx >= x0) & (xx < x0 + w)
        else:
            cy, cx = y0 + h / 2, x0 + w / 2
            mask = ((yy + 0.5 - cy) / (h / 2)) ** 2 + ((xx + 0.5 - cx) / (w / 2)) ** 2 <= 1
        rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
        image[mask] = COLOURS[k]
        boxes.append([cols[0], rows[0], cols[-1] + 1, rows[-1] + 1])
        labels.append(k + 1)
        masks.append(mask)
    return image, np.array(boxes, np.float32), np.array(labels, np.int64), np.array(masks, np.uint8)


class Shapes:
    """``count`` generated images as (JPEG bytes, boxes, labels)."""

    def __init__(self, count: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.samples = [shapes_image(rng) for _ in range(count)]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[bytes, np.ndarray, np.ndarray]:
        image, boxes, labels, _ = self.samples[i]
        data = io.BytesIO()
        Image.fromarray(image).save(data, "JPEG", quality=98, subsampling=0)
        return data.getvalue(), boxes, labels


FIELDS = {"image": ss.RGBImageField(), "boxes": ss.RaggedField(np.float32, (4,)), "labels": ss.RaggedField(np.int64)}


@pytest.fixture(scope="module")
def shapes(tmp_path_factory) -> tuple[str, Shapes]:
    source = Shapes(48, seed=5)
    path = str(tmp_path_factory.mktemp("detection") / "shapes.slip")
    ss.write(path, source, FIELDS, verbose=False)
    return path, source


def shape_pixels(image: np.ndarray, label: int) -> np.ndarray:
    """Where the decoded image shows the colour of shape ``label``: within
    100 of it in every channel, so that an edge pixel counts when it is
    mostly the shape's and JPEG's ringing around other shapes never does."""
    return np.all(np.abs(image.astype(np.int32) - COLOURS[label - 1]) <= 100, axis=-1)


def half_shape_pixels(image: np.ndarray, label: int, box: np.ndarray) -> np.ndarray:
    """The pixels of the box (and a pixel around it) that are at least half
    the colour of shape ``label``: its mask as the decoded image shows it."""
    colour = COLOURS[label - 1].astype(np.int32)
    half = np.all(np.where(colour > 0, image >= 128, image < 128), axis=-1)
    (x1, y1), (x2, y2) = (np.floor(box[:2]) - 1).astype(int), (np.ceil(box[2:]) + 1).astype(int)
    near = np.zeros_like(half)
    near[max(y1, 0):y2, max(x1, 0):x2] = True
    return half & near


def moved_mask(mask: np.ndarray, transform: np.ndarray) -> np.ndarray:
    """A stored mask on the output grid (nearest neighbour, the rule of
    slipstream.fields.geometry), computed with NumPy."""
    sy, sx, ty, tx, out_h, out_w = (transform[k] for k in (geometry.SCALE_Y, geometry.SCALE_X, geometry.OFFSET_Y,
                                                           geometry.OFFSET_X, geometry.OUT_H, geometry.OUT_W))
    rows = np.floor((np.arange(int(out_h)) + 0.5 - ty) / sy).astype(np.int64)
    cols = np.floor((np.arange(int(out_w)) + 0.5 - tx) / sx).astype(np.int64)
    inside = (rows[:, None] >= 0) & (rows[:, None] < mask.shape[0]) & (cols >= 0) & (cols < mask.shape[1])
    return np.where(inside, mask[rows.clip(0, mask.shape[0] - 1)][:, cols.clip(0, mask.shape[1] - 1)], 0)


def clipped(box: np.ndarray, transform: np.ndarray) -> bool:
    """Whether the stored box, moved by ``transform``, reaches past the output."""
    corners = geometry.apply_to_points(transform, np.reshape(box, (2, 2)))
    return bool(corners.min() < 0 or corners[:, 0].max() > transform[geometry.OUT_W]
                or corners[:, 1].max() > transform[geometry.OUT_H])


GEOMETRIES = {
    "random resized crop + flip": [RandomResizedCrop(224, scale=(0.3, 1.0)), RandomHorizontalFlip()],
    "center crop": [CenterCrop(200, ratio=0.9)],
    "resize + random crop + vertical flip": [Resize(256), RandomCrop(224), RandomVerticalFlip(p=0.5)],
    "whole image resized, unfolded flip, translate": [Resize((180, 240)), RandomTranslate(padding=30),
                                                      RandomHorizontalFlip()],
    "IoU crop + flip": [RandomIoUCrop(256, boxes="boxes"), RandomHorizontalFlip()],
}


@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_kept_boxes_bound_their_shapes_in_the_decoded_image(shapes, name):
    path, source = shapes
    min_visibility = 0.3
    pipelines = {"image": GEOMETRIES[name],
                 "boxes": [BoundingBoxes(follow="image", min_visibility=min_visibility)],
                 "labels": [KeptWithBoxes("boxes")], "counts": [Count("boxes")],
                 "transform": [ss.compiler.RefNode("boxes", None, output=geometry.TRANSFORM)]}
    checked = dropped = tight = 0
    with ss.Loader(path, 16, pipelines, order=ss.Order("random", seed=3), verbose=False) as loader:
        for epoch in range(2):
            loader.set_epoch(epoch)
            for batch, indices in zip(loader, loader.epoch_batches(epoch)):
                images, boxes, labels, counts, transforms = (t.numpy() for t in batch)
                for image, b, lab, n, t, index in zip(images, boxes, labels, counts, transforms, indices):
                    _, stored_boxes, stored_labels, masks = source.samples[index]
                    assert set(lab[:n]) <= set(stored_labels) and not lab[n:].any() and not b[n:].any()
                    for box, label in zip(b[:n], lab[:n]):
                        pixels = shape_pixels(image, label)
                        rows, cols = np.flatnonzero(pixels.any(1)), np.flatnonzero(pixels.any(0))
                        assert rows.size, f"{name}: sample {index} kept box {box} of shape {label}, not in the image"
                        extent = np.array([cols[0], rows[0], cols[-1] + 1, rows[-1] + 1])
                        # the box holds its shape's pixels, within a pixel ...
                        assert extent[0] >= box[0] - 1 and extent[1] >= box[1] - 1, (name, index, label, box, extent)
                        assert extent[2] <= box[2] + 1 and extent[3] <= box[3] + 1, (name, index, label, box, extent)
                        # ... and, unless clipping cut the shape, no more than them
                        if not clipped(stored_boxes[list(stored_labels).index(label)], t):
                            assert np.all(np.abs(extent - box) <= 1), (name, index, label, box, extent)
                            tight += 1
                        checked += 1
                    for label, mask in zip(stored_labels, masks):
                        if label in lab[:n]:
                            continue
                        moved = moved_mask(mask, t)
                        visible = moved.sum() / (mask.sum() * abs(geometry.determinant(t)))
                        assert visible < min_visibility + 0.05 or min(moved.any(0).sum(), moved.any(1).sum()) <= 1, \
                            (name, index, label, visible)
                        dropped += 1
    assert checked > 50 and tight > 30
    if name == "random resized crop + flip":
        assert dropped > 5  # the crops do cut shapes out


def test_dropped_boxes_leave_with_their_labels_and_counts_match(shapes):
    path, source = shapes
    pipelines = {"image": [RandomResizedCrop(128, scale=(0.05, 0.2))],
                 "boxes": [BoundingBoxes(follow="image", min_visibility=0.5, format="XYWH")],
                 "labels": [KeptWithBoxes("boxes", fill=-1)], "counts": [Count("boxes")]}
    with ss.Loader(path, 48, pipelines, order=ss.Order("sequential"), verbose=False) as loader:
        _, boxes, labels, counts = next(iter(loader))
    counts = counts.numpy()
    assert boxes.shape == (48, 6, 4) and labels.shape == (48, 6)
    assert counts.min() == 0 and (counts < np.array([len(s[1]) for s in source.samples])).any()
    for b, lab, n in zip(boxes.numpy(), labels.numpy(), counts):
        assert (lab[:n] > 0).all() and (lab[n:] == -1).all()
        assert (b[:n, 2:] >= 1).all()  # XYWH: widths and heights of at least min_size
    per_sample = unpad(boxes, counts)
    assert [len(p) for p in per_sample] == counts.tolist()


def test_iou_crop_keeps_a_box_centre_and_overlap(shapes):
    path, _ = shapes
    pipelines = {"image": [RandomIoUCrop(200, boxes="boxes", sampler_options=(0.5,))],
                 "boxes": [BoundingBoxes(follow="image", center_inside=True)], "counts": [Count("boxes")],
                 "labels": None}
    with ss.Loader(path, 48, pipelines, order=ss.Order("sequential"), verbose=False) as loader:
        counts = next(iter(loader))[2]
    assert (counts.numpy() >= 1).all()  # every image has a box, and every crop holds a box's centre


def test_boxes_are_deterministic_and_resume_exactly(shapes):
    path, _ = shapes
    from slipstream.ops import presets

    def run(skip: int | None = None, state=None):
        with ss.Loader(path, 8, presets.detection_train(160), order=ss.Order("random", seed=11),
                       verbose=False) as loader:
            if state is not None:
                loader.load_state_dict(state)
            out, saved = [], None
            for k, batch in enumerate(loader):
                out.append([t.numpy().copy() for t in batch])
                if k + 1 == skip:
                    saved = loader.state_dict()
                    break
            return out, saved

    whole, _ = run()
    again, _ = run()
    first, state = run(skip=2)
    rest, _ = run(state=state)
    for a, b in zip(whole, again):
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
    for a, b in zip(whole, first + rest):
        assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_errors_name_the_problem(shapes, tmp_path):
    path, _ = shapes
    with pytest.raises(ss.PipelineError, match="pipeline 'boxes' refers to pipeline 'picture', which does not exist"):
        ss.Loader(path, 8, {"image": [RandomResizedCrop(64)], "boxes": [BoundingBoxes(follow="picture")]},
                  verbose=False)
    with pytest.raises(ss.ArgumentError,
                       match="reads field 'labels' as a RaggedField\\(dtype, inner_shape=\\(4,\\)\\)"):
        ss.Loader(path, 8, {"image": [RandomResizedCrop(64)], "labels": [BoundingBoxes(follow="image")]},
                  verbose=False)
    with pytest.raises(ss.ArgumentError, match="^BoundingBoxes: format must be one of 'XYXY', 'XYWH', 'CXCYWH', "
                                               "got 'xyxy'$"):
        BoundingBoxes(format="xyxy")
    with pytest.raises(ss.PipelineError, match="which has no BoundingBoxes"):
        ss.Loader(path, 8, {"image": [RandomResizedCrop(64)], "labels": [KeptWithBoxes("image")]}, verbose=False)
    with pytest.raises(ss.ArgumentError, match="sample .* has 6 rows in field 'boxes', more than max_length=2"):
        _ragged_decoder(path, 2)


def _ragged_decoder(path: str, max_length: int):
    from slipstream.fields.decoders import DecodeSource
    from slipstream.fields.ragged import RaggedDecoder

    reader = ss.Reader(path)
    return RaggedDecoder(DecodeSource(reader, np.zeros(0, np.uint8)), "boxes", max_length=max_length)


class CornerKeypoints(Shapes):
    """The shapes with two keypoints per box: its top-left corner ("left",
    visible) and its top-right corner ("right", visibility 2)."""

    def __getitem__(self, i: int) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
        jpeg, boxes, labels = super().__getitem__(i)
        points = np.stack([np.stack([boxes[:, 0], boxes[:, 1], np.ones(len(boxes))], -1),
                           np.stack([boxes[:, 2], boxes[:, 1], np.full(len(boxes), 2.0)], -1)], 1)
        return jpeg, boxes, labels, points.astype(np.float32)


def test_keypoints_follow_the_image_and_swap_sides_when_mirrored(tmp_path):
    path = str(tmp_path / "keypoints.slip")
    ss.write(path, CornerKeypoints(24, seed=8), {**FIELDS, "points": ss.RaggedField(np.float32, (2, 3))},
             verbose=False)
    pipelines = {"image": [RandomResizedCrop(160, scale=(0.5, 1.0)), RandomHorizontalFlip()],
                 "boxes": [BoundingBoxes(follow="image")], "counts": [Count("boxes")],
                 "points": [Keypoints(follow="image", boxes="boxes", flip_indices=(1, 0))],
                 "transform": [ss.compiler.RefNode("boxes", None, output=geometry.TRANSFORM)], "labels": None}
    inside = flipped = 0
    with ss.Loader(path, 24, pipelines, order=ss.Order("random", seed=2), verbose=False) as loader:
        _, boxes, counts, points, transforms = (t.numpy() for t in next(iter(loader)))
    for b, n, p, t in zip(boxes, counts, points, transforms):
        assert not p[n:].any()
        mirrored = t[geometry.SCALE_X] < 0
        flipped += mirrored
        for box, (left, right) in zip(b[:n], p[:n]):
            # point 0 is the top-left corner, mirrored or not (when mirrored, it is the stored right corner,
            # with that point's visibility); a point the crop left out is (0, 0, 0)
            for point, (x, y), visibility in ((left, box[:2], 2.0 if mirrored else 1.0),
                                              (right, box[2:0:-1], 1.0 if mirrored else 2.0)):
                if not point.any():
                    continue
                assert point[2] == visibility and 0 <= point[0] <= t[geometry.OUT_W]
                assert 0 <= point[1] <= t[geometry.OUT_H]
                if abs(point[0] - x) < 1e-3 and abs(point[1] - y) < 1e-3:
                    inside += 1
    assert flipped and inside > 20


class ShapesWithMasks(Shapes):
    """The shapes with their instance masks (one per box) and a semantic
    mask (each pixel its shape's label, 0 for the background)."""

    def __getitem__(self, i: int) -> tuple[Any, ...]:
        jpeg, boxes, labels = super().__getitem__(i)
        masks = self.samples[i][3]
        semantic = (masks * labels[:, None, None]).max(0).astype(np.uint8)
        return jpeg, boxes, labels, masks, semantic


@pytest.fixture(scope="module")
def shapes_with_masks(tmp_path_factory) -> tuple[str, ShapesWithMasks]:
    source = ShapesWithMasks(32, seed=9)
    path = str(tmp_path_factory.mktemp("masks") / "shapes.slip")
    ss.write(path, source, {**FIELDS, "masks": ss.InstanceMasksField(), "mask": ss.SegmentationMaskField()},
             verbose=False)
    return path, source


@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_masks_coincide_with_their_shapes_in_the_decoded_image(shapes_with_masks, name):
    path, source = shapes_with_masks
    pipelines = {"image": GEOMETRIES[name], "boxes": [BoundingBoxes(follow="image")],
                 "labels": [KeptWithBoxes("boxes")], "counts": [Count("boxes")],
                 "masks": [InstanceMasks(follow="image", boxes="boxes")],
                 "mask": [SegmentationMask(follow="image", fill=255)],
                 "transform": [ss.compiler.RefNode("boxes", None, output=geometry.TRANSFORM)]}
    measured = []
    with ss.Loader(path, 16, pipelines, order=ss.Order("random", seed=4), verbose=False) as loader:
        for batch, indices in zip(loader, loader.epoch_batches(0)):
            images, all_boxes, labels, counts, masks, semantic, transforms = (t.numpy() for t in batch)
            for image, boxes, lab, n, inst, sem, t, index in zip(images, all_boxes, labels, counts, masks, semantic,
                                                                 transforms, indices):
                assert not inst[n:].any()
                covered = moved_mask(np.ones(source.samples[index][0].shape[:2], np.uint8), t).astype(bool)
                assert (sem[~covered] == 255).all() and (sem[covered] != 255).all()
                inter = union = 0
                for k in range(n):
                    pixels = half_shape_pixels(image, lab[k], boxes[k])
                    inter += (pixels & (inst[k] == 1)).sum()
                    union += (pixels | (inst[k] == 1)).sum()
                    assert ((sem == lab[k]) == (inst[k] == 1)).all()  # one shape, two masks, the same pixels
                if union >= 2000:
                    measured.append(inter / union)
    assert len(measured) > 10
    assert min(measured) >= 0.98, (name, sorted(measured)[:3])


def test_batches_do_not_depend_on_the_thread_count(shapes_with_masks):
    path, _ = shapes_with_masks
    from slipstream.ops import presets

    pipelines = {**presets.detection_train(96, masks="masks"), "mask": [SegmentationMask(follow="image")]}
    runs = []
    for threads in (1, 2):
        with ss.Loader(path, 8, pipelines, order=ss.Order("random", seed=5), num_threads=threads,
                       verbose=False) as loader:
            runs.append([[t.numpy().copy() for t in batch] for batch in loader])
    assert len(runs[0]) == 4
    for a, b in zip(*runs):
        assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_fixed_and_batch_own_padding(shapes):
    path, _ = shapes
    from slipstream.ops import TrimToCounts

    def batches(trim: bool) -> list[list[np.ndarray]]:
        end = [TrimToCounts("counts")] if trim else []
        pipelines = {"image": [RandomResizedCrop(64, scale=(0.05, 0.3))],
                     "boxes": [BoundingBoxes(follow="image", max_boxes=10), *end],
                     "labels": [KeptWithBoxes("boxes"), *end], "counts": [Count("boxes")]}
        with ss.Loader(path, 16, pipelines, order=ss.Order("sequential"), verbose=False) as loader:
            return [[t.numpy().copy() for t in batch[1:]] for batch in loader]

    for (boxes, labels, counts), (padded, padded_labels, _) in zip(batches(True), batches(False)):
        m = int(counts.max())
        assert padded.shape == (len(counts), 10, 4) and padded_labels.shape == (len(counts), 10)
        assert boxes.shape == (len(counts), m, 4) and labels.shape == (len(counts), m)
        assert np.array_equal(boxes, padded[:, :m]) and not padded[:, m:].any()
        assert np.array_equal(labels, padded_labels[:, :m])
    with pytest.raises(ss.ArgumentError, match="has 6 boxes in field 'boxes', more than max_boxes=5"):
        ss.Loader(path, 8, {"image": [RandomResizedCrop(64)], "boxes": [BoundingBoxes(max_boxes=5)]}, verbose=False)


def _boxes_dataset(path, boxes: list[np.ndarray], extra: dict[str, tuple[Any, list[Any]]] | None = None) -> str:
    """A dataset of plain 64 x 80 images with the given boxes (and extra fields)."""
    image = np.zeros((64, 80, 3), np.uint8)
    extra = extra or {}
    samples = [(image, b, np.arange(1, len(b) + 1), *(values[i] for _, values in extra.values()))
               for i, b in enumerate(boxes)]
    fields = {"image": ss.RGBImageField("raw"), "boxes": ss.RaggedField(np.float32, (4,)),
              "labels": ss.RaggedField(np.int64), **{name: field for name, (field, _) in extra.items()}}
    ss.write(path, samples, fields, verbose=False)
    return str(path)


def test_boxes_with_a_nan_are_dropped(tmp_path):
    path = _boxes_dataset(tmp_path / "nan.slip", [np.array([[np.nan, 10, 50, 60], [4, 5, 24, 25]], np.float32)])
    pipelines = {"image": [Resize((64, 80))], "boxes": [BoundingBoxes()], "labels": [KeptWithBoxes()],
                 "counts": [Count()]}
    with ss.Loader(path, 1, pipelines, verbose=False) as loader:
        _, boxes, labels, counts = next(iter(loader))
    assert counts.tolist() == [1] and labels[0, 0] == 2 and np.isfinite(boxes.numpy()).all()


def test_changing_a_threshold_or_a_fill_compiles_the_same_stage(tmp_path):
    # min_size and the padding fill are values the stage takes, not constants of its source; a float16 per-box field
    # is padded too (its fill reaches the stage as bytes)
    boxes = [np.array([[4, 5, 24, 25], [70, 50, 80, 64]], np.float32)]
    path = _boxes_dataset(tmp_path / "values.slip", boxes,
                          {"score": (ss.RaggedField(np.float16), [np.array([0.5, 0.25], np.float16)])})
    seen = []
    for min_size, fill in ((1.0, -1), (12.0, 7)):
        pipelines = {"image": [Resize((64, 80))], "boxes": [BoundingBoxes(min_size=min_size, max_boxes=3)],
                     "labels": [KeptWithBoxes(fill=fill)], "score": [KeptWithBoxes(fill=fill / 2)],
                     "counts": [Count()]}
        with ss.Loader(path, 1, pipelines, verbose=False) as loader:
            batch = dict(zip(loader.output_names, next(iter(loader))))
            seen.append(([s.source for s in loader.compiled.sources], batch["labels"][0].tolist(),
                         batch["score"][0].tolist()))
    assert seen[0][0] == seen[1][0]
    assert seen[0][1:] == ([1, 2, -1], [0.5, 0.25, -0.5])
    assert seen[1][1:] == ([1, 7, 7], [0.5, 3.5, 3.5])  # the 10 x 14 box is under min_size=12


def test_a_per_box_field_read_in_full_while_boxes_are_dropped_is_refused(tmp_path):
    boxes = [np.array([[4, 5, 24, 25], [70, 50, 80, 64]], np.float32)]
    path = _boxes_dataset(tmp_path / "crowd.slip", boxes,
                          {"iscrowd": (ss.RaggedField(np.uint8), [np.array([0, 1], np.uint8)])})
    from slipstream.ops import presets

    with pytest.raises(ss.PipelineError, match="output 'iscrowd' reads field 'iscrowd', which holds a row per box, "
                                               "in full"):
        ss.Loader(path, 1, presets.detection_train(64), verbose=False)
    with ss.Loader(path, 1, presets.detection_train(64, per_box=("iscrowd",)), verbose=False) as loader:
        names = loader.output_names
        batch = dict(zip(names, next(iter(loader))))
    n = int(batch["counts"][0])
    assert batch["iscrowd"][0, :n].tolist() == [[0, 1][k] for k in (batch["labels"][0, :n] - 1).tolist()]
    with pytest.raises(ss.ArgumentError, match="fill -1 does not fit the uint8 rows of field 'iscrowd'"):
        ss.Loader(path, 1, {**presets.detection_train(64), "iscrowd": [KeptWithBoxes(fill=-1)]}, verbose=False)


def test_iou_crop_reads_boxes_in_their_stored_format(tmp_path):
    xyxy = [np.array([[20, 16, 40, 32]], np.float32)] * 32
    xywh = [np.array([[20, 16, 20, 16]], np.float32)] * 32
    kept = []
    for name, boxes, fmt in (("xyxy", xyxy, "XYXY"), ("xywh", xywh, "XYWH")):
        path = _boxes_dataset(tmp_path / f"{name}.slip", boxes)
        pipelines = {"image": [RandomIoUCrop(48, stored_format=fmt)],
                     "boxes": [BoundingBoxes(stored_format=fmt, center_inside=True)], "labels": [KeptWithBoxes()],
                     "counts": [Count()]}
        with ss.Loader(path, 32, pipelines, order=ss.Order("sequential"), verbose=False) as loader:
            kept.append(next(iter(loader))[3].numpy())
    assert (kept[0] == 1).all() and np.array_equal(kept[0], kept[1])


def test_masks_of_another_size_than_their_images_are_refused(tmp_path):
    image = np.zeros((64, 80, 3), np.uint8)
    path = tmp_path / "masks.slip"
    ss.write(path, [(image, np.zeros((32, 40), np.uint8))],
             {"image": ss.RGBImageField("raw"), "mask": ss.SegmentationMaskField()}, verbose=False)
    with pytest.raises(ss.PipelineError, match="sample 0's mask in field 'mask' is 32x40, but its image in field "
                                               "'image' is 64x80: masks must have their image's size"):
        ss.Loader(path, 1, {"image": [Resize((32, 32))], "mask": [SegmentationMask()]}, verbose=False)


def test_segmentation_fill_comes_from_the_dataset(tmp_path):
    image, mask = np.zeros((64, 80, 3), np.uint8), np.full((64, 80), 300, np.uint16)
    fields = {"image": ss.RGBImageField("raw"), "mask": ss.SegmentationMaskField(np.uint16)}
    pipelines = {"image": [RandomTranslate(padding=40)], "mask": [SegmentationMask()]}
    seen = []
    for name, metadata in (("plain", None), ("ignore", {"ignore_index": 500})):
        path = tmp_path / f"{name}.slip"
        ss.write(path, [(image, mask)] * 8, fields, user_metadata=metadata, verbose=False)
        with ss.Loader(path, 8, pipelines, verbose=False) as loader:
            seen.append(set(np.unique(next(iter(loader))[1].numpy()).tolist()))
    assert seen == [{300, 65535}, {300, 500}]  # the dtype's largest value, then the dataset's ignore_index


@pytest.mark.parametrize("mix", [ss.ops.MixUp(), ss.ops.CutMix(), ss.ops.MixUpOrCutMix()], ids=type)
def test_boxes_and_masks_asked_to_follow_a_batch_mixing_are_refused(tmp_path, mix):
    # CutMix pastes a box of the next sample: a mask following it kept the sample's own classes there (torchvision's
    # MixUp and CutMix refuse boxes and masks)
    masks = [np.zeros((64, 80), np.uint8)] * 2
    path = _boxes_dataset(tmp_path / "mixed.slip", [np.array([[4, 5, 24, 25]], np.float32)] * 2,
                          {"mask": (ss.SegmentationMaskField(), masks)})
    following = {"boxes": [BoundingBoxes()], "labels": [KeptWithBoxes()], "counts": [Count()], "mask": None}
    for outputs in (following, {"boxes": None, "labels": None, "mask": [SegmentationMask()]}):
        with pytest.raises(ss.PipelineError, match=r"follows pipeline 'image', where .*Mix.* moves pixels with no "
                                                   r"single map .* apply it in a pipeline without boxes"):
            ss.Loader(path, 2, {"image": [Resize((64, 80)), mix], **outputs}, verbose=False)


def test_bool_rows_follow_the_kept_boxes_padded_with_false(tmp_path):
    # a per-box flag (Pascal VOC's "difficult") stored as bool: the default fill 0 was refused ("fill 0 does not fit
    # the bool rows"), so presets.detection_train(per_box=...) could not carry it at all
    boxes = [np.array([[4, 5, 24, 25], [70, 50, 80, 64], [30, 30, 30.5, 40]], np.float32)]
    path = _boxes_dataset(tmp_path / "flags.slip", boxes,
                          {"difficult": (ss.RaggedField(np.bool_), [np.array([True, False, True])])})
    from slipstream.ops import presets

    pipelines = {**presets.detection_train(64, per_box=("difficult",)), "boxes": [BoundingBoxes(max_boxes=4)]}
    with ss.Loader(path, 1, pipelines, verbose=False) as loader:
        batch = dict(zip(loader.output_names, next(iter(loader))))
    n = int(batch["counts"][0])
    assert n >= 1 and batch["difficult"].dtype == torch.bool and batch["difficult"].shape == (1, 4)
    assert batch["difficult"][0].tolist() == [[True, False, True][k] for k in (batch["labels"][0, :n] - 1).tolist()] \
        + [False] * (4 - n)
    for fill in (1, True):
        with ss.Loader(path, 1, {**pipelines, "difficult": [KeptWithBoxes(fill=fill)]}, verbose=False) as loader:
            assert dict(zip(loader.output_names, next(iter(loader))))["difficult"][0, n:].tolist() == [True] * (4 - n)
    with pytest.raises(ss.ArgumentError, match="fill 2 does not fit the bool rows of field 'difficult'"):
        ss.Loader(path, 1, {**pipelines, "difficult": [KeptWithBoxes(fill=2)]}, verbose=False)


@pytest.mark.parametrize("fill", [254.7, -0.5, True, "3"])
def test_a_segmentation_fill_that_is_not_a_class_id_is_refused(fill):
    # 254.7 filled with class 254, -0.5 with class 0 (the background) and True with class 1, silently
    with pytest.raises(ss.ArgumentError, match=rf"^SegmentationMask: fill must be None or an int in \[0, 65535\], "
                                               rf"got {re.escape(repr(fill))}$"):
        SegmentationMask(fill=fill)
    assert SegmentationMask(fill=np.uint8(254)).fill == 254
