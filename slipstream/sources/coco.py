"""Object detection and instance segmentation datasets in the COCO format:
an image folder and an "instances" annotation file (``images``,
``annotations``, ``categories``), as COCO, LVIS, Objects365 and most
labelling tools' exports give them.

Boxes are written in absolute pixel ``XYXY`` coordinates of the stored
image (the ``torchvision.tv_tensors.BoundingBoxes`` convention), category
ids become contiguous labels ``1..K`` with ``0`` left for the background (as
torchvision's detection models expect), and segmentations (polygons,
uncompressed and compressed RLE) are decoded into binary masks by
pycocotools when the dataset is written, so that loading needs neither
pycocotools nor the annotation file.  pycocotools runs in a helper process
(:mod:`slipstream.sources.maskprocess`): a crash in it fails the sample
being decoded, not the process that reads the dataset.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from slipstream.errors import ArgumentError, DatasetNotFoundError, FormatError
from slipstream.sources.adapters import NamedSamples, named_samples
from slipstream.sources.folders import fingerprint_line, require_folder
from slipstream.sources.maskprocess import MASKS
from slipstream.sources.segmentation import read_image

CROWD_MODES = ("keep", "drop")
"""What :class:`COCODetection` does with crowd annotations (``iscrowd=1``)."""

BOX_FORMAT = "XYXY"
"""The stored box layout: ``(x1, y1, x2, y2)`` in pixels, ``x2 = x + w``."""

_MIN_POLYGON = 6
"""Coordinates of the smallest polygon with an area (three points)."""

POLYGON_MARGIN = 2
"""How far a polygon's points may lie outside their image, in image sizes
(a point of a 640-pixel-wide image may have x from -1280 to 1920):
annotation tools leave points a little outside, and nothing further out
changes the mask.  pycocotools turns coordinates into 32-bit integers, so
far-out ones (1e10) overflow there and crash it."""

POLYGON_OUTLINE = 100
"""How long a polygon's outline may be, in image perimeters (its steps
measured as the longer of their x and y extents, as pycocotools walks
them): pycocotools allocates memory for every pixel step of the outline
without checking that it got it, so a polygon walking far enough (points
near 1e8, or millions of zigzags) crashes it."""

_INSTANCES = itertools.count()

_NUMBERS = frozenset({int, float})
"""The types of a number parsed from JSON (``bool`` is another type)."""


def mask_api() -> Any:
    """``pycocotools.mask``, imported on first use.

    Raises:
        ImportError: pycocotools is not installed; the message names the
            extra that installs it.
    """
    try:
        from pycocotools import mask
    except ImportError as exc:
        raise ImportError("COCO segmentations (polygons and RLE) are decoded by pycocotools, which is not "
                          "installed: pip install 'slipstream[coco]' (or pycocotools), or pass masks=False "
                          "to write boxes and labels only") from exc
    return mask


@dataclasses.dataclass(frozen=True)
class _ImageAnnotations:
    """The annotations of one image, in annotation-file order, as compact
    arrays rather than the JSON's objects: a dataset of a million
    annotations then holds a few million Python objects instead of tens of
    millions, which matters to the writer's forked workers (reference
    counting writes to every object a worker touches)."""

    ids: np.ndarray  # (n,) int64 annotation ids
    boxes: np.ndarray  # (n, 4) float32 XYXY
    labels: np.ndarray  # (n,) int64
    iscrowd: np.ndarray  # (n,) uint8
    segmentations: tuple[tuple[str, Any], ...] | None  # per annotation (kind, data); None without masks
    names: tuple[Any, ...] | None = None  # the ids as the file gives them, where one is not an integer


def _number(value: Any) -> bool:
    """Whether ``value`` is a finite number (not a bool, not a string)."""
    try:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    except OverflowError:  # an integer beyond float's range
        return False


def _integer(value: Any) -> bool:
    """Whether ``value`` is a JSON integer (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a regular file (False for a name the system
    refuses, such as one too long)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _coordinates(polygon: Any) -> np.ndarray | None:
    """A polygon's coordinates as float64, or None unless it is a list of
    an even count of finite JSON numbers."""
    if not isinstance(polygon, list) or not set(map(type, polygon)) <= _NUMBERS or len(polygon) % 2:
        return None
    try:
        coordinates = np.array(polygon, np.float64)
    except OverflowError:  # an integer beyond float's range
        return None
    return coordinates if np.isfinite(coordinates).all() else None


def _polygon_extents(polygons: list[np.ndarray], sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For polygons of at least three points, polygon ``i`` of an image of
    ``sizes[i]`` (height, width), in whole-array NumPy work: per point,
    whether it lies more than :data:`POLYGON_MARGIN` image sizes outside its
    image; per polygon, the index of its first point and whether its outline
    is longer than :data:`POLYGON_OUTLINE` image perimeters.  (The outline
    is walked as pycocotools walks it: each step, closing one included, as
    the longer of its x and y extents.)"""
    points = np.fromiter(map(len, polygons), np.int64, len(polygons)) // 2
    xy = np.concatenate(polygons).reshape(-1, 2)
    x, y = xy[:, 0], xy[:, 1]
    height, width = np.repeat(sizes[:, 0], points), np.repeat(sizes[:, 1], points)
    outside = (x < -POLYGON_MARGIN * width) | (x > (1 + POLYGON_MARGIN) * width) | \
        (y < -POLYGON_MARGIN * height) | (y > (1 + POLYGON_MARGIN) * height)
    starts = np.cumsum(points) - points
    following = np.arange(1, len(x) + 1)
    following[starts + points - 1] = starts  # the last point steps back to the first
    steps = np.maximum(np.abs(x[following] - x), np.abs(y[following] - y))
    outline = np.add.reduceat(steps, starts)
    return outside, starts, outline > POLYGON_OUTLINE * 2 * (sizes[:, 0] + sizes[:, 1])


def _polygon_problem(coordinates: np.ndarray, height: int, width: int) -> str:
    """What makes a polygon of an image of ``height`` x ``width`` unsafe
    to give pycocotools (see :func:`_polygon_extents`), or ``""``."""
    outside, _, too_long = _polygon_extents([coordinates], np.array([[height, width]]))
    if outside.any():
        k = int(np.flatnonzero(outside)[0])
        x, y = coordinates[2 * k], coordinates[2 * k + 1]
        return (f"has the point ({x:g}, {y:g}), more than {POLYGON_MARGIN} image sizes outside its {width}x{height} "
                f"image (x from {-POLYGON_MARGIN * width} to {(1 + POLYGON_MARGIN) * width}, y from "
                f"{-POLYGON_MARGIN * height} to {(1 + POLYGON_MARGIN) * height})")
    if too_long[0]:
        x, y = coordinates[0::2], coordinates[1::2]
        outline = np.maximum(np.abs(np.diff(x, append=x[0])), np.abs(np.diff(y, append=y[0]))).sum()
        return (f"has an outline of {outline:,.0f} pixels, more than {POLYGON_OUTLINE} times its {width}x{height} "
                f"image's perimeter ({2 * (height + width)} pixels)")
    return ""


def _first_unsafe(segmentations: list[tuple[str, Any]], sizes: np.ndarray, chunk: int = 1 << 16) -> int | None:
    """The first of ``segmentations`` (of images of ``sizes``) with a
    polygon :func:`_polygon_problem` refuses, or None: checked a chunk of
    polygons at a time (one by one, COCO's million would take half a
    minute)."""
    polygons, owners = [], []
    for k, (kind, data) in enumerate(segmentations):
        if kind == "polygons":
            polygons.extend(data)
            owners.extend(itertools.repeat(k, len(data)))
    for start in range(0, len(polygons), chunk):
        part = owners[start:start + chunk]
        outside, starts, too_long = _polygon_extents(polygons[start:start + chunk], sizes[part])
        bad = np.flatnonzero(np.logical_or.reduceat(outside, starts) | too_long)
        if bad.size:
            return part[int(bad[0])]
    return None


def _compressed_runs(code: bytes) -> np.ndarray | None:
    """The run lengths a compressed RLE string codes, read as pycocotools'
    ``rleFrString`` reads them (5 bits a character from ``"0"`` with a
    continuation bit, the last character's top bit a sign, and every run
    after the third a difference from the run two before it), or None
    unless the string codes non-negative 32-bit runs."""
    chars = np.frombuffer(code, np.uint8).astype(np.int64) - 48
    if not chars.size or chars.min() < 0 or chars.max() > 63 or chars[-1] & 0x20:
        return None
    last = (chars & 0x20) == 0  # the last character of each value
    starts = np.flatnonzero(np.concatenate(([True], last[:-1])))
    lengths = np.diff(np.append(starts, chars.size))
    if lengths.max() > 7:  # over 35 bits: no 32-bit run
        return None
    shift = 5 * (np.arange(chars.size) - np.repeat(starts, lengths))
    values = np.add.reduceat((chars & 0x1F) << shift, starts)
    values -= ((chars[last] & 0x10) != 0).astype(np.int64) << (5 * lengths)
    runs = values.copy()
    runs[1::2] = np.cumsum(values[1::2])
    runs[2::2] = np.cumsum(values[2::2])
    return runs if runs.min() >= 0 and runs.max() < 1 << 32 else None

def _box_values(bboxes: list[Any]) -> np.ndarray:
    """The boxes as ``(n, 4)`` float64, a row of NaN for each that is not a
    list of four JSON numbers: NumPy alone would read ``True`` and ``"1"``
    as numbers.  The types are checked in C loops (``map``, ``set``) when
    every box is well formed, box by box only when one is not."""
    if set(map(type, bboxes)) <= {list} and set(map(len, bboxes)) <= {4}:
        flat = list(itertools.chain.from_iterable(bboxes))
        if set(map(type, flat)) <= _NUMBERS:
            try:
                return np.array(flat, np.float64).reshape(-1, 4)
            except OverflowError:  # an integer beyond float's range: found below
                pass
    values = np.full((len(bboxes), 4), np.nan)
    for k, bbox in enumerate(bboxes):
        if isinstance(bbox, list) and len(bbox) == 4 and all(_number(v) for v in bbox):
            values[k] = bbox
    return values


class COCODetection:
    """A COCO-format detection dataset: the images of ``annotation_file``
    (found under ``images_root`` by their ``file_name``) with their
    annotated objects.

    Samples are in image-id order, one per image of the file, images with
    no annotation included (with zero boxes).  ``dataset[i]`` is a dict of
    the fields of :meth:`default_fields`:

    - ``image``: the image file's bytes (stored unresized, so boxes and
      masks stay in its pixel coordinates);
    - ``image_id``: the COCO image id;
    - ``boxes``: ``(n, 4)`` float32, ``(x1, y1, x2, y2)`` in pixels
      (COCO's ``[x, y, w, h]`` gives ``x2 = x + w``), clipped to the image;
    - ``labels``: ``(n,)`` int64, the contiguous label of each category
      (``1..K`` by ascending category id; ``0`` is the background);
    - ``iscrowd``: ``(n,)`` uint8;
    - ``masks`` (with ``masks=True``): ``(n, H, W)`` uint8 binary masks,
      decoded by pycocotools from polygons or RLE (instances may overlap).

    The file is read and checked when the object is made, so that a
    malformed annotation is reported before any image is written: every
    message names the annotation file and the annotation or image id.

    Args:
        images_root: the folder of the images (``file_name`` is relative to it).
        annotation_file: the instances JSON file.
        masks: decode segmentations into masks (needs pycocotools, the
            ``slipstream[coco]`` extra); ``False`` writes boxes and labels only.
        crowd: ``"keep"`` crowd annotations (``iscrowd=1``, which COCO's
            evaluation ignores and torchvision's references leave out of
            training) or ``"drop"`` them.
        box_tolerance: how far, in pixels, a box may reach outside its image
            (boxes within it are clipped to the image; beyond it they are an
            error).

    Raises:
        DatasetNotFoundError: the annotation file, the image folder or an
            image file does not exist.
        ArgumentError: the annotation file is not COCO instances JSON, or an
            annotation is malformed: an unknown image or category id, an
            annotation id listed twice, a ``file_name`` that leaves the image
            folder (absolute, or with a ``..`` part), a box that is not four
            finite numbers or lies outside its image, a polygon that is not
            finite numbers or lies far outside its image
            (:data:`POLYGON_MARGIN`, :data:`POLYGON_OUTLINE`), a
            segmentation that is neither polygons nor RLE, or an RLE whose
            size is not its image's or whose runs (compressed or not) do not
            add up to its image's pixels.
        ImportError: ``masks=True`` without pycocotools installed.

    Attributes:
        image_ids: the COCO image id of each sample (ascending).
        file_names: each sample's image file, relative to ``images_root``.
        sizes: ``(len, 2)`` int64, each image's ``(height, width)`` as the
            annotation file gives it (its file must agree, else writing it
            fails).
        category_ids: COCO category ids in label order (label ``k`` is
            ``category_ids[k - 1]``).
        category_names: category names in label order.
        label_of: COCO category id -> label.

    Polygons of fewer than three points have no area and are left out of
    their mask (pycocotools would read a two-point one as a box).  A sample
    whose segmentation pycocotools refuses or crashes on raises
    :class:`~slipstream.errors.FormatError` naming the annotation, and so
    follows the writer's ``on_error``.  Boxes of zero width or height are
    kept as the file gives them; torchvision's detection models refuse them
    in training, as they do boxes that augmentations (crops) shrink to
    nothing, so the training pipeline filters them.
    """

    def __init__(self, images_root: str | os.PathLike, annotation_file: str | os.PathLike, masks: bool = True,
                 crowd: str = "keep", *, box_tolerance: float = 1.0) -> None:
        if crowd not in CROWD_MODES:
            raise ArgumentError(f"crowd must be one of {', '.join(map(repr, CROWD_MODES))}, got {crowd!r}")
        if not _number(box_tolerance) or box_tolerance < 0:
            raise ArgumentError(f"box_tolerance must be a number of pixels >= 0, got {box_tolerance!r}")
        self.images_root = Path(images_root)
        self.annotation_file = Path(annotation_file)
        self.masks = bool(masks)
        self.crowd = crowd
        self.box_tolerance = float(box_tolerance)
        self._token = (os.getpid(), next(_INSTANCES))  # names its requests to the mask helper
        self._last_decoded = -2
        if self.masks:
            mask_api()  # now, not in the middle of writing
        require_folder(self.images_root, f"the images of {self.annotation_file}")
        content = self._load()
        self._read_categories(content)
        self._read_images(content)
        self._read_annotations(content)
        self._check_files()

    # ---------------------------------------------------------------- reading the annotation file

    def _load(self) -> dict[str, Any]:
        if not self.annotation_file.is_file():
            raise DatasetNotFoundError(f"{self.annotation_file}: no such annotation file")
        try:
            with open(self.annotation_file, "rb") as f:
                content = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ArgumentError(f"{self.annotation_file} is not JSON: {exc}") from None
        if not isinstance(content, dict) or not isinstance(content.get("images"), list) or \
                not isinstance(content.get("categories"), list):
            raise ArgumentError(f"{self.annotation_file} is not a COCO instances file: it needs 'images' and "
                                f"'categories' lists (and 'annotations')")
        if not isinstance(content.get("annotations", []), list):
            raise ArgumentError(f"{self.annotation_file}: 'annotations' is not a list")
        return content

    def _read_categories(self, content: dict[str, Any]) -> None:
        categories: dict[int, str] = {}
        for category in content["categories"]:
            if not isinstance(category, dict) or not _integer(category.get("id")):
                raise ArgumentError(f"{self.annotation_file}: category {category!r:.80} has no integer 'id'")
            if category["id"] in categories:
                raise ArgumentError(f"{self.annotation_file}: category id {category['id']} is listed twice")
            categories[category["id"]] = str(category.get("name", category["id"]))
        self.category_ids = sorted(categories)
        self.category_names = [categories[c] for c in self.category_ids]
        self.label_of = {c: k + 1 for k, c in enumerate(self.category_ids)}

    def _read_images(self, content: dict[str, Any]) -> None:
        entries: dict[int, tuple[str, int, int]] = {}
        for image in content["images"]:
            if not isinstance(image, dict) or not _integer(image.get("id")):
                raise ArgumentError(f"{self.annotation_file}: image {image!r:.80} has no integer 'id'")
            where = f"{self.annotation_file}: image {image['id']}"
            if image["id"] in entries:
                raise ArgumentError(f"{where} is listed twice")
            if not isinstance(image.get("file_name"), str) or not image["file_name"]:
                raise ArgumentError(f"{where} has no 'file_name'")
            self._check_file_name(where, image["file_name"])
            for key in ("width", "height"):
                if not _integer(image.get(key)) or image[key] < 1:
                    raise ArgumentError(f"{where} ({image['file_name']}) has no positive integer {key!r}: "
                                        f"{image.get(key)!r}")
            entries[image["id"]] = (image["file_name"], image["height"], image["width"])
        if not entries:
            raise ArgumentError(f"{self.annotation_file} lists no images")
        self.image_ids = sorted(entries)
        self.file_names = [entries[i][0] for i in self.image_ids]
        self.sizes = np.array([entries[i][1:] for i in self.image_ids], np.int64).reshape(-1, 2)
        self._sample_of = {image_id: k for k, image_id in enumerate(self.image_ids)}
        self._heights, self._widths = self.sizes[:, 0].tolist(), self.sizes[:, 1].tolist()

    def _check_file_name(self, where: str, name: str) -> None:
        """Refuse a ``file_name`` that is not a path inside the image folder:
        an absolute path, or one with a ``..`` part, would read a file from
        anywhere and store it in the dataset.  (The check is on the name:
        symbolic links inside the folder are followed, as datasets use them
        to share images.)"""
        path = PurePosixPath(name)
        if path.is_absolute() or ".." in path.parts or "\0" in name:
            raise ArgumentError(f"{where} has file_name {name!r:.200}, which is not a path inside the image folder "
                                f"{self.images_root}: file names must be relative, without '..'")

    def _read_annotations(self, content: dict[str, Any]) -> None:
        samples, ids, bboxes, labels, crowds, segmentations = [], [], [], [], [], []
        names: list[Any] = []  # the ids as the file gives them, for messages
        irregular: set[int] = set()  # the annotations whose id is not an integer
        written: list[Any] = []  # each segmentation as the file gives it, for messages
        seen: set[int] = set()
        for annotation in content.get("annotations", []):
            if not isinstance(annotation, dict):
                raise ArgumentError(f"{self.annotation_file}: annotation {annotation!r:.80} is not an object")
            ann_id = annotation.get("id")
            if _integer(ann_id):
                if ann_id in seen:
                    raise ArgumentError(f"{self.annotation_file}: annotation id {ann_id} is listed twice (ids "
                                        f"name annotations: which one it means is unknown)")
                seen.add(ann_id)
            image_id, category_id = annotation.get("image_id"), annotation.get("category_id")
            sample = self._sample_of.get(image_id) if _integer(image_id) else None
            if sample is None:
                raise ArgumentError(f"{self.annotation_file}: annotation {ann_id!r:.80} is of image {image_id!r:.80}, "
                                    f"which the file does not list in 'images'")
            label = self.label_of.get(category_id) if _integer(category_id) else None
            if label is None:
                known = ", ".join(map(str, self.category_ids[:20])) + (" ..." if len(self.category_ids) > 20 else "")
                raise ArgumentError(f"{self._where(ann_id, sample)} has category id {category_id!r:.80}, which is "
                                    f"not one of the file's categories ({known})")
            iscrowd = annotation.get("iscrowd", 0)
            if iscrowd not in (0, 1):  # True and False compare equal to 1 and 0
                raise ArgumentError(f"{self._where(ann_id, sample)} has iscrowd={iscrowd!r}, not 0 or 1")
            if iscrowd and self.crowd == "drop":
                continue
            if self.masks:
                if "segmentation" not in annotation:
                    raise ArgumentError(f"{self._where(ann_id, sample)} has no 'segmentation' (pass masks=False "
                                        f"for boxes only)")
                segmentations.append(self._segmentation(annotation["segmentation"], ann_id, sample))
                written.append(annotation["segmentation"])
            samples.append(sample)
            if not _integer(ann_id):
                irregular.add(len(ids))
            ids.append(ann_id if _integer(ann_id) else -1)  # an int64 array of them is kept
            names.append(ann_id)
            bboxes.append(annotation.get("bbox"))
            labels.append(label)
            crowds.append(int(iscrowd))
        samples_array = np.array(samples, np.int64)
        boxes = self._boxes(bboxes, samples_array, names)
        if self.masks:
            self._check_polygons(segmentations, samples_array, names, written)
        # Group by image, each image's annotations in file order (as pycocotools and torchvision give them).
        order = np.argsort(samples_array, kind="stable")
        bounds = np.searchsorted(samples_array[order], np.arange(len(self.image_ids) + 1))
        ids_array, labels_array = np.array(ids, np.int64), np.array(labels, np.int64)
        crowds_array = np.array(crowds, np.uint8)
        self._annotations = []
        for start, stop in itertools.pairwise(bounds):
            rows = order[start:stop]
            self._annotations.append(_ImageAnnotations(
                ids=ids_array[rows], boxes=boxes[rows], labels=labels_array[rows], iscrowd=crowds_array[rows],
                segmentations=tuple(segmentations[r] for r in rows) if self.masks else None,
                names=tuple(names[r] for r in rows) if irregular and irregular.intersection(rows.tolist())
                else None))

    def _where(self, ann_id: Any, sample: int) -> str:
        """Names an annotation in messages: the file, its id and its image's."""
        return f"{self.annotation_file}: annotation {ann_id!r:.80} (image {self.image_ids[sample]})"

    def _boxes(self, bboxes: list[Any], samples: np.ndarray, ids: list[Any]) -> np.ndarray:
        """The ``[x, y, w, h]`` boxes as ``(n, 4)`` float32 ``[x1, y1, x2, y2]``
        clipped to their images, checked all at once (a Python loop over a
        million boxes would take seconds)."""
        values = _box_values(bboxes)
        bad = np.flatnonzero(~np.isfinite(values).all(axis=1))
        if bad.size:
            k = int(bad[0])
            raise ArgumentError(f"{self._where(ids[k], int(samples[k]))} has bbox {bboxes[k]!r:.80}, not four finite "
                                f"numbers [x, y, w, h]")
        bad = np.flatnonzero((values[:, 2] < 0) | (values[:, 3] < 0))
        if bad.size:
            k = int(bad[0])
            raise ArgumentError(f"{self._where(ids[k], int(samples[k]))} has bbox {bboxes[k]} of negative width or "
                                f"height")
        heights, widths = (self.sizes[samples, 0].astype(np.float64), self.sizes[samples, 1].astype(np.float64))
        x1, y1 = values[:, 0], values[:, 1]
        x2, y2 = x1 + values[:, 2], y1 + values[:, 3]
        tol = self.box_tolerance
        bad = np.flatnonzero((x1 < -tol) | (y1 < -tol) | (x2 > widths + tol) | (y2 > heights + tol))
        if bad.size:
            k = int(bad[0])
            raise ArgumentError(f"{self._where(ids[k], int(samples[k]))} has bbox [x, y, w, h] = {bboxes[k]}, which "
                                f"reaches outside its {int(widths[k])}x{int(heights[k])} image by more than "
                                f"box_tolerance={tol:g} pixels")
        boxes = np.stack([np.clip(x1, 0, widths), np.clip(y1, 0, heights), np.clip(x2, 0, widths),
                          np.clip(y2, 0, heights)], axis=1)
        return boxes.astype(np.float32).reshape(-1, 4)

    def _check_polygons(self, segmentations: list[tuple[str, Any]], samples: np.ndarray, ids: list[Any],
                        written: list[Any]) -> None:
        """Refuse, by name, the first polygon that lies far outside its image
        or walks too long an outline (:func:`_polygon_problem`)."""
        unsafe = _first_unsafe(segmentations, self.sizes[samples])
        if unsafe is None:
            return
        sample = int(samples[unsafe])
        for k, polygon in enumerate(written[unsafe]):  # which of its polygons, counted as the file lists them
            coordinates = _coordinates(polygon)
            if coordinates is not None and len(coordinates) >= _MIN_POLYGON:
                problem = _polygon_problem(coordinates, self._heights[sample], self._widths[sample])
                if problem:
                    raise ArgumentError(f"{self._where(ids[unsafe], sample)}: polygon {k} of its segmentation "
                                        f"{problem}")

    def _segmentation(self, segmentation: Any, ann_id: Any, sample: int) -> tuple[str, Any]:
        """A compact, checked copy of the segmentation of annotation
        ``ann_id`` (of sample ``sample``): ``("polygons", arrays)``,
        ``("counts", uint32 array)`` (uncompressed RLE) or
        ``("compressed", bytes)`` (compressed RLE)."""
        height, width = self._heights[sample], self._widths[sample]

        def where() -> str:
            return self._where(ann_id, sample)

        if isinstance(segmentation, list):
            polygons = []
            for k, polygon in enumerate(segmentation):
                coordinates = _coordinates(polygon)
                if coordinates is None:
                    raise ArgumentError(f"{where()}: polygon {k} of its segmentation is not a list of x, y "
                                        f"coordinates (finite numbers, an even count)")
                if len(coordinates) >= _MIN_POLYGON:  # shorter ones have no area: never given to pycocotools
                    polygons.append(coordinates)  # its extent is checked with all the others' (_check_polygons)
            return "polygons", tuple(polygons)
        if isinstance(segmentation, dict) and "counts" in segmentation and "size" in segmentation:
            size, counts = segmentation["size"], segmentation["counts"]
            if not isinstance(size, list) or [int(v) for v in size if _integer(v)] != [height, width]:
                raise ArgumentError(f"{where()}: its RLE segmentation has size {size!r:.40} (height, width), but its "
                                    f"image is {height}x{width} (height x width)")
            if isinstance(counts, str):
                try:
                    kind, data = "compressed", counts.encode("ascii")
                except UnicodeEncodeError:
                    raise ArgumentError(f"{where()}: its compressed RLE counts are not ASCII") from None
                runs = _compressed_runs(data)
                if runs is None:
                    raise ArgumentError(f"{where()}: its compressed RLE counts are not run lengths in COCO's string "
                                        f"code")
            else:
                runs = np.array(counts) if isinstance(counts, list) and counts and set(map(type, counts)) == {int} \
                    else None
                if runs is None or runs.dtype.kind not in "iu" or (runs < 0).any() or (runs > height * width).any():
                    raise ArgumentError(f"{where()}: its RLE counts are neither a string (compressed RLE) nor a list "
                                        f"of non-negative integers (uncompressed RLE)")
                kind, data = "counts", runs.astype(np.uint32)
            total = int(runs.sum(dtype=np.int64))
            if total != height * width:  # pycocotools would leave the pixels past the runs uninitialised
                raise ArgumentError(f"{where()}: its RLE counts add up to {total} pixels, but its image has "
                                    f"{height}x{width} = {height * width}")
            return kind, data
        raise ArgumentError(f"{where()}: its segmentation is a {type(segmentation).__name__}, neither a list of "
                            f"polygons nor an RLE object with 'counts' and 'size'")

    def _check_files(self) -> None:
        missing = [k for k, name in enumerate(self.file_names) if not _is_file(self.images_root / name)]
        if missing:
            first = missing[0]
            more = f" (and {len(missing) - 1} more of its images)" if len(missing) > 1 else ""
            raise DatasetNotFoundError(f"{self.annotation_file}: image {self.image_ids[first]} is "
                                       f"{self.images_root / self.file_names[first]}, which does not exist{more}")

    # ---------------------------------------------------------------- samples

    def __len__(self) -> int:
        return len(self.image_ids)

    def __getitem__(self, index: int) -> dict[str, Any]:
        path = self.images_root / self.file_names[index]
        data, height, width = read_image(path)
        expected = (int(self.sizes[index][0]), int(self.sizes[index][1]))
        if (height, width) != expected:
            raise ValueError(f"{path} is {width}x{height} pixels, but {self.annotation_file} gives image "
                             f"{self.image_ids[index]} as {expected[1]}x{expected[0]}: its boxes and masks would "
                             f"not match its pixels")
        annotations = self._annotations[index]
        sample = {"image": data, "image_id": self.image_ids[index], "boxes": annotations.boxes.copy(),
                  "labels": annotations.labels.copy(), "iscrowd": annotations.iscrowd.copy()}
        if self.masks:
            sample["masks"] = self._decode_masks(index, height, width)
        return sample

    def _decode_masks(self, index: int, height: int, width: int) -> np.ndarray:
        """The ``(n, H, W)`` uint8 masks of sample ``index``'s annotations,
        decoded by pycocotools in a helper process
        (:mod:`slipstream.sources.maskprocess`), where a crash is contained.

        Raises:
            FormatError: pycocotools refuses a segmentation or crashes on it.
        """
        annotations = self._annotations[index]
        masks, failure = MASKS.decode((self._token, index, height, width), annotations.segmentations or (),
                                      (height, width), self._ahead(index))
        if failure is not None:
            k, reason = failure
            name = annotations.names[k] if annotations.names is not None else int(annotations.ids[k])
            raise FormatError(f"{self._where(name, index)}: its segmentation cannot be decoded: {reason}")
        return masks

    def _ahead(self, index: int) -> tuple[Any, Any, tuple[int, int]] | None:
        """The mask request of the sample after ``index`` while samples are
        read in order (the helper decodes it while this one is encoded)."""
        in_order, self._last_decoded = self._last_decoded == index - 1, index
        following = index + 1
        if not in_order or following >= len(self):
            return None
        height, width = int(self.sizes[following][0]), int(self.sizes[following][1])
        return ((self._token, following, height, width), self._annotations[following].segmentations or (),
                (height, width))

    def describe(self, index: int) -> str:
        """The image id and file, for error messages."""
        return f"image {self.image_ids[index]}, {self.images_root / self.file_names[index]}"

    def default_fields(self) -> dict[str, Any]:
        """The fields written when none are given: ``image``
        (:class:`~slipstream.RGBImageField`: the file's JPEG, its pixels unchanged),
        ``image_id`` (:class:`~slipstream.IntField`), ``boxes``
        (:class:`~slipstream.RaggedField` float32 rows of 4), ``labels``
        (int64), ``iscrowd`` (uint8) and, with ``masks=True``, ``masks``
        (:class:`~slipstream.InstanceMasksField`)."""
        from slipstream.fields import IntField, RaggedField, RGBImageField

        fields: dict[str, Any] = {"image": RGBImageField(), "image_id": IntField(),
                                  "boxes": RaggedField(np.float32, (4,)), "labels": RaggedField(np.int64),
                                  "iscrowd": RaggedField(np.uint8)}
        if self.masks:
            from slipstream.fields import InstanceMasksField

            fields["masks"] = InstanceMasksField()
        return fields

    def user_metadata(self) -> dict[str, Any]:
        """Stored in the file's metadata: ``classes``, the category names by
        label (``classes[0]`` is ``"__background__"``); ``category_ids``,
        the COCO category id of each label (``None`` for the background);
        and ``box_format``, ``"XYXY"``."""
        return {"classes": ["__background__", *self.category_names], "category_ids": [None, *self.category_ids],
                "box_format": BOX_FORMAT}

    def samples_for(self, fields: Mapping[str, Any]) -> NamedSamples:
        """The samples' values for ``fields``, by name, in order.

        Raises:
            ArgumentError: a field resizes images, which would leave the
                boxes and masks in the pixels of the images as they were.
        """
        return named_samples(self, fields)

    def fingerprint(self) -> str:
        """Hash of the annotation file's content, the options, and every
        image's path, size and modification time: changes whenever the
        dataset does."""
        digest = hashlib.sha256(repr((self.masks, self.crowd, self.box_tolerance)).encode())
        with open(self.annotation_file, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        for name in self.file_names:
            stat = (self.images_root / name).stat()
            digest.update(fingerprint_line(name, stat.st_size, stat.st_mtime_ns))
        return digest.hexdigest()

    def identity(self) -> dict[str, Any]:
        """What :func:`slipstream.cached` keys the dataset file by: the
        annotation file's resolved path and :meth:`fingerprint`."""
        return {"coco": str(self.annotation_file.resolve()), "content": self.fingerprint()}

    def cache_name(self) -> str:
        """The annotation file's stem, which starts the cached file's name."""
        return self.annotation_file.stem

    def __repr__(self) -> str:
        boxes = sum(len(a.ids) for a in self._annotations)
        return (f"COCODetection({str(self.images_root)!r}, {str(self.annotation_file)!r}, {len(self)} images, "
                f"{boxes} annotations, {len(self.category_ids)} categories)")
