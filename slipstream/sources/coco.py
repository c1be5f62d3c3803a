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
pycocotools nor the annotation file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from slipstream.errors import ArgumentError, DatasetNotFoundError
from slipstream.sources.folders import require_folder
from slipstream.sources.segmentation import read_image

CROWD_MODES = ("keep", "drop")
"""What :class:`COCODetection` does with crowd annotations (``iscrowd=1``)."""

BOX_FORMAT = "XYXY"
"""The stored box layout: ``(x1, y1, x2, y2)`` in pixels, ``x2 = x + w``."""

_MIN_POLYGON = 6
"""Coordinates of the smallest polygon with an area (three points)."""


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


def _number(value: Any) -> bool:
    """Whether ``value`` is a finite JSON number (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _integer(value: Any) -> bool:
    """Whether ``value`` is a JSON integer (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


class COCODetection:
    """A COCO-format detection dataset: the images of ``annotation_file``
    (found under ``images_root`` by their ``file_name``) with their
    annotated objects.

    Samples are in image-id order, one per image of the file, images with
    no annotation included (with zero boxes).  ``dataset[i]`` is a dict of
    the fields of :meth:`default_fields`:

    - ``image``: the image file's bytes (stored as they are, so boxes and
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
            annotation is malformed: an unknown image or category id, a box
            outside its image, a segmentation that is neither polygons nor
            RLE or whose size is not its image's.
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
    their mask (pycocotools would read a two-point one as a box).  Boxes of
    zero width or height are kept as the file gives them; torchvision's
    detection models refuse them in training, as they do boxes that
    augmentations (crops) shrink to nothing, so the training pipeline
    filters them.
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

    def _read_annotations(self, content: dict[str, Any]) -> None:
        samples, ids, bboxes, labels, crowds, segmentations = [], [], [], [], [], []
        for annotation in content.get("annotations", []):
            if not isinstance(annotation, dict):
                raise ArgumentError(f"{self.annotation_file}: annotation {annotation!r:.80} is not an object")
            ann_id = annotation.get("id")
            sample = self._sample_of.get(annotation.get("image_id"))
            if sample is None:
                raise ArgumentError(f"{self.annotation_file}: annotation {ann_id!r} is of image "
                                    f"{annotation.get('image_id')!r}, which the file does not list in 'images'")
            label = self.label_of.get(annotation.get("category_id"))
            if label is None:
                known = ", ".join(map(str, self.category_ids[:20])) + (" ..." if len(self.category_ids) > 20 else "")
                raise ArgumentError(f"{self._where(ann_id, sample)} has category id "
                                    f"{annotation.get('category_id')!r}, which is not one of the file's categories "
                                    f"({known})")
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
            samples.append(sample)
            ids.append(ann_id if _integer(ann_id) else -1)
            bboxes.append(annotation.get("bbox"))
            labels.append(label)
            crowds.append(int(iscrowd))
        samples_array = np.array(samples, np.int64)
        boxes = self._boxes(bboxes, samples_array, ids)
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
                segmentations=tuple(segmentations[r] for r in rows) if self.masks else None))

    def _where(self, ann_id: Any, sample: int) -> str:
        """Names an annotation in messages: the file, its id and its image's."""
        return f"{self.annotation_file}: annotation {ann_id!r} (image {self.image_ids[sample]})"

    def _boxes(self, bboxes: list[Any], samples: np.ndarray, ids: list[int]) -> np.ndarray:
        """The ``[x, y, w, h]`` boxes as ``(n, 4)`` float32 ``[x1, y1, x2, y2]``
        clipped to their images, checked all at once (a Python loop over a
        million boxes would take seconds)."""
        try:
            values = np.array(bboxes, np.float64) if all(isinstance(b, list) for b in bboxes) else None
        except (TypeError, ValueError):
            values = None
        if values is None or values.shape != (len(bboxes), 4):
            values = np.full((len(bboxes), 4), np.nan)
            for k, bbox in enumerate(bboxes):
                if isinstance(bbox, list) and len(bbox) == 4 and all(_number(v) for v in bbox):
                    values[k] = bbox
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
                # NumPy checks the coordinates: a Python loop over COCO's tens of millions would take a while
                try:
                    coordinates = np.array(polygon, np.float64) if isinstance(polygon, list) else None
                except (TypeError, ValueError):
                    coordinates = None
                if coordinates is None or coordinates.ndim != 1 or len(coordinates) % 2 or \
                        not np.isfinite(coordinates).all():
                    raise ArgumentError(f"{where()}: polygon {k} of its segmentation is not a list of x, y "
                                        f"coordinates (finite numbers, an even count)")
                if len(coordinates) >= _MIN_POLYGON:
                    polygons.append(coordinates)
            return "polygons", tuple(polygons)
        if isinstance(segmentation, dict) and "counts" in segmentation and "size" in segmentation:
            size, counts = segmentation["size"], segmentation["counts"]
            if not isinstance(size, list) or [int(v) for v in size if _integer(v)] != [height, width]:
                raise ArgumentError(f"{where()}: its RLE segmentation has size {size!r:.40} (height, width), but its "
                                    f"image is {height}x{width} (height x width)")
            if isinstance(counts, str):
                try:
                    return "compressed", counts.encode("ascii")
                except UnicodeEncodeError:
                    raise ArgumentError(f"{where()}: its compressed RLE counts are not ASCII") from None
            runs = np.array(counts) if isinstance(counts, list) and counts else None
            if runs is not None and runs.ndim == 1 and runs.dtype.kind in "iu" and (runs >= 0).all():
                total = int(runs.sum(dtype=np.int64))
                if total != height * width:
                    raise ArgumentError(f"{where()}: its RLE counts add up to {total} pixels, but its image has "
                                        f"{height}x{width} = {height * width}")
                return "counts", runs.astype(np.uint32)
            raise ArgumentError(f"{where()}: its RLE counts are neither a string (compressed RLE) nor a list of "
                                f"non-negative integers (uncompressed RLE)")
        raise ArgumentError(f"{where()}: its segmentation is a {type(segmentation).__name__}, neither a list of "
                            f"polygons nor an RLE object with 'counts' and 'size'")

    def _check_files(self) -> None:
        missing = [k for k, name in enumerate(self.file_names) if not (self.images_root / name).is_file()]
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
        """The ``(n, H, W)`` uint8 masks of sample ``index``'s annotations."""
        api = mask_api()
        annotations = self._annotations[index]
        masks = np.zeros((len(annotations.ids), height, width), np.uint8)
        with warnings.catch_warnings():
            # pycocotools' decoder, built before NumPy 2, asks for an array copy in a way NumPy 2 deprecates;
            # the masks are right, and the warning says nothing the user can act on.
            warnings.filterwarnings("ignore", "__array__ implementation doesn't accept a copy", DeprecationWarning)
            for k, (kind, data) in enumerate(annotations.segmentations or ()):
                try:
                    if kind == "polygons":
                        if not data:
                            continue  # no polygon with an area: an empty mask
                        rle = api.merge(api.frPyObjects(list(data), height, width))
                    elif kind == "counts":
                        rle = api.frPyObjects({"counts": data, "size": [height, width]}, height, width)
                    else:
                        rle = {"counts": data, "size": [height, width]}
                    masks[k] = api.decode(rle)
                except Exception as exc:  # pycocotools raises bare Exceptions and ValueErrors
                    raise ValueError(f"{self.annotation_file}: annotation {int(annotations.ids[k])} (image "
                                     f"{self.image_ids[index]}): its segmentation cannot be decoded: {exc}") from None
        return masks

    def describe(self, index: int) -> str:
        """The image id and file, for error messages."""
        return f"image {self.image_ids[index]}, {self.images_root / self.file_names[index]}"

    def default_fields(self) -> dict[str, Any]:
        """The fields written when none are given: ``image``
        (:class:`~slipstream.RGBImageField`, the file's bytes as they are),
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
            digest.update(f"{name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
        return digest.hexdigest()

    def __repr__(self) -> str:
        boxes = sum(len(a.ids) for a in self._annotations)
        return (f"COCODetection({str(self.images_root)!r}, {str(self.annotation_file)!r}, {len(self)} images, "
                f"{boxes} annotations, {len(self.category_ids)} categories)")
