"""Synthetic detection and segmentation datasets, written on the spot for
tests and benchmarks, with their ground truth.

:func:`make_coco` writes JPEGs of drawn shapes (rectangles, ellipses,
triangles, pentagons, stars, two-part objects and crowds of discs) and a
COCO instances file describing them: polygons for most objects, compressed
RLE for some, uncompressed RLE for crowds (``iscrowd=1``).  Every shape is
painted exactly over the pixels of its annotation's mask as pycocotools
decodes it, and its box is the tight box of that mask, so the truth it
returns (masks, boxes, labels, colours) holds for the image's pixels too.

:func:`make_segmentation_folders` writes a Pascal VOC layout: JPEG images,
palette PNG class maps (the palette index is the class id, 255 marks object
boundaries) and a split file.

    python tests/detection_data.py coco /tmp/coco 200     # a dataset to look at or benchmark
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

CATEGORIES = (
    {"id": 12, "name": "triangle", "supercategory": "shape"},
    {"id": 3, "name": "rectangle", "supercategory": "shape"},
    {"id": 20, "name": "star", "supercategory": "shape"},
    {"id": 7, "name": "ellipse", "supercategory": "shape"},
    {"id": 5, "name": "pentagon", "supercategory": "shape"},
)
"""The categories of :func:`make_coco`, listed out of id order and with gaps
between ids, as real files have them."""

CATEGORY_OF = {"rectangle": 3, "pair": 3, "pentagon": 5, "ellipse": 7, "crowd": 7, "triangle": 12, "star": 20}
"""Shape kind -> category id ("pair" is a two-part rectangle, "crowd" a group of discs)."""

LABEL_OF = {c["id"]: k + 1 for k, c in enumerate(sorted(CATEGORIES, key=lambda c: c["id"]))}
"""COCO category id -> contiguous label 1..K (by ascending id)."""

ENCODINGS = ("polygon", "polygon", "rle", "polygon", "crowd", "pair")
"""How the annotations are encoded, in turn over the dataset, so that even a
small one has each: "polygon" (one polygon), "pair" (two polygons of one
object), "rle" (compressed RLE) and "crowd" (uncompressed RLE, iscrowd=1)."""

SHAPE_COLOURS = np.array([(230, 40, 40), (40, 200, 60), (50, 80, 230), (240, 220, 30), (220, 50, 220),
                          (30, 210, 220), (250, 140, 20), (140, 60, 200), (255, 255, 255), (20, 20, 20)], np.uint8)
"""Colours of the shapes, far apart from each other and from the grey backgrounds."""

SEGMENTATION_CLASSES = ("background", "rectangle", "ellipse", "triangle", "bar")
"""Class names of :func:`make_segmentation_folders` (index = class id)."""

BOUNDARY = 255
"""The class id of object boundaries in VOC masks (ignored by losses)."""


@dataclasses.dataclass
class ImageTruth:
    """What one image of :func:`make_coco` holds, its annotations in the
    order of the annotation file.

    Attributes:
        image_id: the COCO image id.
        path: the JPEG file.
        height, width: its size.
        annotation_ids: ``(n,)`` int64.
        boxes: ``(n, 4)`` float32, ``(x1, y1, x2, y2)`` pixels: the tight box
            of each mask (``x2`` one past the last column).
        category_ids: ``(n,)`` int64 COCO category ids.
        labels: ``(n,)`` int64 contiguous labels (:data:`LABEL_OF`).
        iscrowd: ``(n,)`` uint8.
        masks: ``(n, H, W)`` uint8, the painted pixels of each annotation.
        colours: ``(n, 3)`` uint8, the colour each was painted in.
        encodings: per annotation, an entry of :data:`ENCODINGS`.
    """

    image_id: int
    path: Path
    height: int
    width: int
    annotation_ids: np.ndarray
    boxes: np.ndarray
    category_ids: np.ndarray
    labels: np.ndarray
    iscrowd: np.ndarray
    masks: np.ndarray
    colours: np.ndarray
    encodings: list[str]


@dataclasses.dataclass
class COCOData:
    """A dataset written by :func:`make_coco`.

    Attributes:
        images_root: the image folder.
        annotation_file: the instances JSON file.
        images: the truth of each image, in image-id order.
    """

    images_root: Path
    annotation_file: Path
    images: list[ImageTruth]

    @property
    def classes(self) -> list[str]:
        """Category names by label, ``"__background__"`` first."""
        return ["__background__"] + [c["name"] for c in sorted(CATEGORIES, key=lambda c: c["id"])]


@dataclasses.dataclass
class SegmentationData:
    """A dataset written by :func:`make_segmentation_folders`.

    Attributes:
        images: the JPEG folder (``JPEGImages``).
        masks: the mask folder (``SegmentationClass``).
        ids_file: a split file naming every sample (``ImageSets/Segmentation/all.txt``).
        names: the sample names, sorted.
        class_maps: the ``(H, W)`` uint8 class map of each sample.
    """

    images: Path
    masks: Path
    ids_file: Path
    names: list[str]
    class_maps: list[np.ndarray]


def background(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A ``(height, width, 3)`` uint8 grey background, plain or noisy."""
    level = rng.integers(90, 170)
    image = np.full((height, width, 3), level, np.float32) + rng.uniform(-15, 15, 3)
    if rng.random() < 0.5:
        image += rng.normal(0, 10, image.shape)
    return image.clip(0, 255).astype(np.uint8)


def shape_polygons(kind: str, rng: np.random.Generator, x: float, y: float, w: float, h: float) -> list[list[float]]:
    """COCO polygons (``[x0, y0, x1, y1, ...]``, 2 decimals) of a shape of
    ``kind`` inside the box ``x, y, w, h``."""
    cx, cy, rx, ry = x + w / 2, y + h / 2, w / 2, h / 2
    if kind == "rectangle":
        points = [(x, y), (x + w, y), (x + w, y + h), (x, y + h)]
    elif kind == "pair":  # two blocks with a gap: one object in two polygons
        gap = w * 0.2
        return shape_polygons("rectangle", rng, x, y, (w - gap) / 2, h) + \
            shape_polygons("rectangle", rng, x + (w + gap) / 2, y, (w - gap) / 2, h)
    elif kind == "triangle":
        points = [(x + rng.uniform(0.2, 0.8) * w, y), (x + w, y + h), (x, y + h)]
    elif kind in ("ellipse", "pentagon", "star"):
        corners = {"ellipse": 36, "pentagon": 5, "star": 10}[kind]
        angles = rng.uniform(0, 2 * np.pi) + np.arange(corners) * 2 * np.pi / corners
        radii = np.where(np.arange(corners) % 2, 0.45, 1.0) if kind == "star" else np.ones(corners)
        points = list(zip(cx + rx * radii * np.cos(angles), cy + ry * radii * np.sin(angles)))
    else:
        raise ValueError(f"unknown shape kind {kind!r}")
    return [[round(float(v), 2) for point in points for v in point]]


def disc_crowd(rng: np.random.Generator, height: int, width: int, x: float, y: float, w: float,
               h: float) -> np.ndarray:
    """A ``(height, width)`` uint8 mask of 3 to 6 small discs inside the box ``x, y, w, h``."""
    yy, xx = np.mgrid[0:height, 0:width]
    mask = np.zeros((height, width), np.uint8)
    radius = max(2.0, min(w, h) / 6)
    for _ in range(int(rng.integers(3, 7))):
        cx, cy = rng.uniform(x + radius, x + w - radius), rng.uniform(y + radius, y + h - radius)
        mask |= ((xx - cx) ** 2 + (yy - cy) ** 2 <= radius ** 2).astype(np.uint8)
    return mask


def uncompressed_rle(mask: np.ndarray) -> dict[str, Any]:
    """COCO's uncompressed RLE of a binary mask: run lengths in column-major
    order, starting with a run of zeros (possibly empty)."""
    flat = mask.flatten(order="F").astype(bool)
    changes = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    edges = np.concatenate([[0], changes, [flat.size]])
    counts = np.diff(edges).tolist()
    if flat[0]:
        counts = [0] + counts
    return {"counts": counts, "size": [int(mask.shape[0]), int(mask.shape[1])]}


def tight_box(mask: np.ndarray) -> list[float]:
    """``[x1, y1, x2, y2]`` of the set pixels of a mask, ``x2``/``y2`` one past the last."""
    ys, xs = np.nonzero(mask)
    return [float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)]


def _place(rng: np.random.Generator, height: int, width: int, taken: list[list[float]],
           margin: float = 3.0) -> tuple[float, float, float, float] | None:
    """A box ``x, y, w, h`` inside the image that keeps ``margin`` pixels from
    every box of ``taken`` (so that no two objects touch), or None."""
    short = min(height, width)
    for _ in range(30):
        w, h = rng.uniform(0.15, 0.45, 2) * short
        x, y = rng.uniform(1, width - w - 1), rng.uniform(1, height - h - 1)
        if all(x + w + margin <= a or a2 + margin <= x or y + h + margin <= b or b2 + margin <= y
               for a, b, a2, b2 in taken):
            return x, y, w, h
    return None


def make_coco(folder: str | Path, count: int = 12, seed: int = 0, *, min_size: int = 96, max_size: int = 320,
              empty_every: int = 5, quality: int = 90) -> COCOData:
    """Write a COCO-format dataset of drawn shapes: ``folder/images/*.jpg``
    and ``folder/instances.json``.

    Image ids are distinct but not consecutive, and the file lists images,
    annotations and categories in no particular order, as real files may.
    Every ``empty_every``-th image has no object; the others have 1 to 5,
    apart from each other, encoded in turn as :data:`ENCODINGS` says.

    Args:
        folder: where to write (created if needed).
        count: the number of images.
        seed: the same seed gives the same files.
        min_size, max_size: the range of image heights and widths.
        empty_every: the period of images without objects.
        quality: JPEG quality.

    Returns:
        The :class:`COCOData`: paths and, per image in id order, the truth.
    """
    from PIL import Image
    from pycocotools import mask as mask_api

    folder = Path(folder)
    images_root = folder / "images"
    images_root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    image_ids = sorted(int(i) for i in rng.choice(np.arange(1, 10 * count + 100), count, replace=False))
    entries, annotations, truth = [], [], {}
    turn = 0
    for k, image_id in enumerate(image_ids):
        height, width = (int(v) for v in rng.integers(min_size, max_size + 1, 2))
        pixels = background(rng, height, width)
        colours = rng.permutation(SHAPE_COLOURS)
        boxes: list[list[float]] = []
        wanted = 0 if k % empty_every == 0 else int(rng.integers(1, 6))
        for _ in range(wanted):
            place = _place(rng, height, width, boxes)
            if place is None:
                continue
            encoding = ENCODINGS[turn % len(ENCODINGS)]
            turn += 1
            if encoding == "crowd":
                kind = "crowd"
                mask = disc_crowd(rng, height, width, *place)
                segmentation: Any = uncompressed_rle(mask)
            else:
                kind = "pair" if encoding == "pair" else \
                    str(rng.choice(["rectangle", "ellipse", "triangle", "pentagon", "star"]))
                polygons = shape_polygons(kind, rng, *place)
                mask = mask_api.decode(mask_api.merge(mask_api.frPyObjects(polygons, height, width)))
                segmentation = polygons
                if encoding == "rle":
                    encoded = mask_api.encode(np.asfortranarray(mask))
                    segmentation = {"size": [height, width], "counts": encoded["counts"].decode("ascii")}
            if not mask.any():
                continue
            colour = colours[len(boxes) % len(colours)]
            pixels[mask.astype(bool)] = colour
            box = tight_box(mask)
            boxes.append(box)
            annotation_id = len(annotations) + 1
            annotations.append({"id": annotation_id, "image_id": image_id, "category_id": CATEGORY_OF[kind],
                                "segmentation": segmentation, "area": float(mask.sum()),
                                "bbox": [box[0], box[1], box[2] - box[0], box[3] - box[1]],
                                "iscrowd": int(encoding == "crowd")})
            truth[annotation_id] = (box, mask.astype(np.uint8), colour, encoding)
        name = f"{image_id:012d}.jpg"
        Image.fromarray(pixels).save(images_root / name, quality=quality)
        entries.append({"id": image_id, "file_name": name, "height": height, "width": width, "license": 1})
    order = rng.permutation(len(annotations))
    annotations = [annotations[i] for i in order]
    shuffled_images = [entries[i] for i in rng.permutation(len(entries))]
    annotation_file = folder / "instances.json"
    content = {"info": {"description": "slipstream synthetic shapes", "version": "1.0"}, "licenses": [],
               "images": shuffled_images, "annotations": annotations, "categories": list(CATEGORIES)}
    annotation_file.write_text(json.dumps(content))
    images = []
    for entry in entries:
        own = [a for a in annotations if a["image_id"] == entry["id"]]  # file order, as a reader groups them
        h, w = entry["height"], entry["width"]
        images.append(ImageTruth(
            image_id=entry["id"], path=images_root / entry["file_name"], height=h, width=w,
            annotation_ids=np.array([a["id"] for a in own], np.int64),
            boxes=np.array([truth[a["id"]][0] for a in own], np.float32).reshape(-1, 4),
            category_ids=np.array([a["category_id"] for a in own], np.int64),
            labels=np.array([LABEL_OF[a["category_id"]] for a in own], np.int64),
            iscrowd=np.array([a["iscrowd"] for a in own], np.uint8),
            masks=np.array([truth[a["id"]][1] for a in own], np.uint8).reshape(-1, h, w),
            colours=np.array([truth[a["id"]][2] for a in own], np.uint8).reshape(-1, 3),
            encodings=[truth[a["id"]][3] for a in own]))
    return COCOData(images_root, annotation_file, images)


def edited(data: COCOData, change: Any) -> None:
    """Rewrite the annotation file of ``data`` after ``change(content)``
    (``content`` is the parsed file, changed in place)."""
    content = json.loads(data.annotation_file.read_text())
    change(content)
    data.annotation_file.write_text(json.dumps(content))


def voc_palette() -> list[int]:
    """The 256-entry palette of Pascal VOC's masks (as a flat RGB list):
    the bits of the index spread over the high bits of red, green and blue;
    index 255 is near white."""
    palette = []
    for index in range(256):
        rgb = [0, 0, 0]
        value = index
        for bit in range(8):
            for channel in range(3):
                rgb[channel] |= ((value >> channel) & 1) << (7 - bit)
            value >>= 3
        palette.extend(rgb)
    return palette


def make_segmentation_folders(folder: str | Path, count: int = 8, seed: int = 0, *, min_size: int = 96,
                              max_size: int = 320, palette: bool = True, quality: int = 90) -> SegmentationData:
    """Write a Pascal VOC style segmentation dataset: ``JPEGImages/<name>.jpg``,
    ``SegmentationClass/<name>.png`` (class ids of
    :data:`SEGMENTATION_CLASSES`, :data:`BOUNDARY` on the outline of every
    object) and ``ImageSets/Segmentation/all.txt``.

    Args:
        folder: where to write (created if needed).
        count: the number of samples.
        seed: the same seed gives the same files.
        min_size, max_size: the range of image heights and widths.
        palette: palette ("P") PNGs as VOC's, else grey ("L") ones as ADE20K's.
        quality: JPEG quality.

    Returns:
        The :class:`SegmentationData`.
    """
    from PIL import Image

    folder = Path(folder)
    images, masks, sets = folder / "JPEGImages", folder / "SegmentationClass", folder / "ImageSets" / "Segmentation"
    for path in (images, masks, sets):
        path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    class_colours = SHAPE_COLOURS[:len(SEGMENTATION_CLASSES)]
    names, class_maps = [], []
    for k in range(count):
        height, width = (int(v) for v in rng.integers(min_size, max_size + 1, 2))
        yy, xx = np.mgrid[0:height, 0:width]
        classes = np.zeros((height, width), np.uint8)
        for _ in range(int(rng.integers(1, 5))):  # later objects cover earlier ones, as in a photo
            cls = int(rng.integers(1, len(SEGMENTATION_CLASSES)))
            w, h = rng.uniform(0.2, 0.6, 2) * (width, height)
            x, y = rng.uniform(0, width - w), rng.uniform(0, height - h)
            if cls == 1:
                inside = (xx >= x) & (xx < x + w) & (yy >= y) & (yy < y + h)
            elif cls == 2:
                inside = ((xx - x - w / 2) / (w / 2)) ** 2 + ((yy - y - h / 2) / (h / 2)) ** 2 <= 1
            elif cls == 3:  # apex at the top middle
                inside = (yy >= y) & (yy < y + h) & (np.abs(xx - x - w / 2) <= (yy - y) * w / (2 * h))
            else:
                inside = (xx >= x) & (xx < x + w) & (np.abs(yy - y - h / 2) <= max(2.0, h / 8))
            classes[inside] = cls
        edge = np.zeros_like(classes, bool)  # a pixel beside one of another class
        edge[1:] |= classes[1:] != classes[:-1]
        edge[:-1] |= classes[:-1] != classes[1:]
        edge[:, 1:] |= classes[:, 1:] != classes[:, :-1]
        edge[:, :-1] |= classes[:, :-1] != classes[:, 1:]
        pixels = background(rng, height, width)
        objects = classes > 0
        pixels[objects] = class_colours[classes[objects]]
        classes[edge] = BOUNDARY
        name = f"{2007 + k % 6}_{k:06d}"
        Image.fromarray(pixels).save(images / f"{name}.jpg", quality=quality)
        mask = Image.fromarray(classes)
        if palette:
            mask.putpalette(voc_palette())  # turns the grey image into a palette one with the same indices
        mask.save(masks / f"{name}.png")
        names.append(name)
        class_maps.append(classes)
    order = np.argsort(names)
    names = [names[i] for i in order]
    class_maps = [class_maps[i] for i in order]
    ids_file = sets / "all.txt"
    ids_file.write_text("".join(f"{n}\n" for n in names))
    return SegmentationData(images, masks, ids_file, names, class_maps)


if __name__ == "__main__":
    kind, target, number = sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 100
    if kind == "coco":
        data = make_coco(target, number)
        print(f"{len(data.images)} images in {data.images_root}, annotations in {data.annotation_file}")
    elif kind == "segmentation":
        seg = make_segmentation_folders(target, number)
        print(f"{len(seg.names)} samples in {seg.images} and {seg.masks}")
    else:
        raise SystemExit("usage: python tests/detection_data.py coco|segmentation FOLDER [COUNT]")
