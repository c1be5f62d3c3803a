"""Semantic segmentation datasets as image and mask folders, in the layout of
Pascal VOC (``JPEGImages/<name>.jpg`` beside ``SegmentationClass/<name>.png``)
and ADE20K (``images/<split>/<name>.jpg`` beside
``annotations/<split>/<name>.png``): one class id per mask pixel.

Also the helper both this module and :mod:`slipstream.sources.coco` use to
read an image file once and learn its size from its header.
"""

from __future__ import annotations

import hashlib
import io
import numbers
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slipstream.errors import ArgumentError, DatasetNotFoundError, FormatError
from slipstream.files import read_head
from slipstream.sources.adapters import NamedSamples, named_samples
from slipstream.sources.folders import IMAGE_SUFFIXES, fingerprint_line, require_folder

MASK_SUFFIXES = frozenset({".png"})
"""File name endings taken as masks by :class:`SegmentationFolder` (lower case)."""

_CLASS_MAP_MODES = frozenset({"P", "L", "1", "I", "I;16", "I;16L", "I;16B"})
"""Pillow modes whose pixel values are class ids as they are: palette
indices, grey levels, bits and 16/32-bit integers."""


def read_image(path: str | os.PathLike) -> tuple[bytes, int, int]:
    """``(bytes, height, width)`` of an image file, its size read from the
    header only (the pixels are not decoded).

    Args:
        path: a JPEG file, or any image Pillow reads.

    Raises:
        FileNotFoundError: no such file.
        DecodeError: a JPEG whose header is malformed.
        ValueError: a file that is neither a JPEG nor an image Pillow reads.
    """
    from slipstream import native
    from slipstream.fields.image import JPEG_SOI

    data = read_head(path, error=FormatError)
    if data.startswith(JPEG_SOI):
        info = native.jpeg_info(data)
        return data, int(info.height), int(info.width)
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"{path} is not a readable image ({type(exc).__name__}: {exc})") from None
    return data, int(height), int(width)


def read_class_map(path: str | os.PathLike, dtype: Any = np.uint8) -> np.ndarray:
    """The ``(H, W)`` class ids of a mask image, as stored: the palette
    index of a palette ("P") PNG (Pascal VOC's masks; the palette's colours
    are ignored), the grey level of a grey PNG (ADE20K's), the value of a
    16-bit one.  Values such as VOC's 255 (object boundaries, ignored by
    the loss) are kept as they are.

    Args:
        path: the mask file.
        dtype: the integer type to return; every value must fit in it.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not an image, a colour image (class maps have one
            channel), or a value that ``dtype`` cannot hold.
    """
    from PIL import Image, UnidentifiedImageError

    dtype = np.dtype(dtype)
    try:
        with Image.open(path) as image:
            mode = image.mode
            if mode not in _CLASS_MAP_MODES:
                raise ValueError(f"{path} is a {mode} image: a class map has one channel (a palette (P), grey "
                                 f"(L) or 16-bit PNG whose pixel values are the class ids), not colours")
            values = np.asarray(image)  # a "P" image gives its palette indices: no conversion to RGB
    except UnidentifiedImageError as exc:
        raise ValueError(f"{path} is not a readable image: {exc}") from None
    if values.dtype == np.bool_:
        values = values.astype(np.uint8)
    if values.size and values.dtype != dtype:
        info = np.iinfo(dtype)
        low, high = int(values.min()), int(values.max())
        if low < info.min or high > info.max:
            raise ValueError(f"{path} holds class ids {low} to {high}, which {dtype} cannot hold "
                             f"(pass a wider mask_dtype)")
    return np.ascontiguousarray(values, dtype)


def _files_by_key(root: Path, suffixes: frozenset[str], what: str) -> tuple[dict[str, Path], dict[str, list[Path]]]:
    """``(relative path without suffix -> file, key -> files)`` for every
    file below ``root`` with one of ``suffixes``; the second dict holds the
    keys of more than one file (``a.jpg`` and ``a.png``), an error only
    when that key is used."""
    require_folder(root, f"{what} folder")
    found: dict[str, Path] = {}
    repeated: dict[str, list[Path]] = {}
    for path in sorted(p for p in root.rglob("*") if p.suffix.lower() in suffixes and p.is_file()):
        key = path.relative_to(root).with_suffix("").as_posix()
        if key in found:
            repeated.setdefault(key, [found[key]]).append(path)
        found[key] = path
    return found, repeated


def _read_ids(ids: Sequence[str] | str | os.PathLike) -> list[str]:
    """Sample names from a sequence, or from a text file with one per line
    (Pascal VOC's ``ImageSets/Segmentation/train.txt``)."""
    if isinstance(ids, (str, os.PathLike)):
        path = Path(ids)
        if not path.is_file():
            raise DatasetNotFoundError(f"{path}: no such file (ids= takes a list of names or a text file with "
                                       f"one name per line)")
        return [line.strip() for line in path.read_text().splitlines() if line.strip()]
    names = [str(name) for name in ids]
    if len(set(names)) != len(names):
        repeated = sorted({n for n in names if names.count(n) > 1})
        raise ArgumentError(f"ids= names {', '.join(repeated[:5])} more than once")
    return names


class SegmentationFolder:
    """Images and their class maps in two folders, paired by file name:
    ``images/<name>.jpg`` with ``masks/<name>.png`` (names may include
    subfolders, which must then match).  This is the layout of Pascal VOC
    (``JPEGImages``, ``SegmentationClass``) and ADE20K (``images/training``,
    ``annotations/training``).

    ``folder[i]`` is a dict ``{"image": bytes, "mask": (H, W) array}``,
    samples sorted by name; the mask holds one class id per pixel, read
    without any conversion (a palette PNG's indices are the ids; VOC's 255
    boundary pixels stay 255).

    Args:
        images: the image folder.
        masks: the mask folder.
        ids: the names to take (a sequence, or a text file with one name per
            line such as VOC's ``ImageSets/Segmentation/train.txt``); by
            default every image, each of which must then have a mask.
        classes: class names, stored in the dataset's user metadata as
            ``classes`` (index = class id).
        ignore_index: the id of pixels a loss should ignore (VOC: 255),
            stored in the user metadata as ``ignore_index``: an int the
            masks' ``mask_dtype`` holds (``SegmentationMask`` fills with it
            where the image shows no stored pixel).
        mask_dtype: ``uint8`` or ``uint16`` (for more than 256 classes):
            the type of the stored masks.
        image_suffixes: file name endings of images.
        mask_suffixes: file name endings of masks.

    Raises:
        DatasetNotFoundError: a folder or the ids file does not exist.
        ArgumentError: an image without its mask or a mask without its
            image (naming both files), a name of ``ids`` with neither, no
            images at all, or an ``ignore_index`` that is not a class id of
            ``mask_dtype``.
    """

    def __init__(self, images: str | os.PathLike, masks: str | os.PathLike, *,
                 ids: Sequence[str] | str | os.PathLike | None = None, classes: Sequence[str] | None = None,
                 ignore_index: int | None = None, mask_dtype: Any = np.uint8,
                 image_suffixes: frozenset[str] = IMAGE_SUFFIXES,
                 mask_suffixes: frozenset[str] = MASK_SUFFIXES) -> None:
        self.images_root, self.masks_root = Path(images), Path(masks)
        self.mask_dtype = np.dtype(mask_dtype)
        if self.mask_dtype not in (np.uint8, np.uint16):
            raise ArgumentError(f"mask_dtype must be uint8 or uint16 (as SegmentationMaskField stores), got "
                                f"{self.mask_dtype}")
        self.classes = None if classes is None else [str(c) for c in classes]
        limit = int(np.iinfo(self.mask_dtype).max)
        integer = isinstance(ignore_index, numbers.Integral) and not isinstance(ignore_index, bool)
        if ignore_index is not None and not (integer and 0 <= ignore_index <= limit):
            raise ArgumentError(f"ignore_index must be a class id the {self.mask_dtype} masks can hold (an int from 0 "
                                f"to {limit}), got {ignore_index!r}")
        self.ignore_index = None if ignore_index is None else int(ignore_index)
        image_files, image_repeats = _files_by_key(self.images_root, frozenset(s.lower() for s in image_suffixes),
                                                   "image")
        mask_files, mask_repeats = _files_by_key(self.masks_root, frozenset(s.lower() for s in mask_suffixes), "mask")
        names = sorted(image_files) if ids is None else _read_ids(ids)
        for name in names:
            if name not in image_files and name not in mask_files:
                raise ArgumentError(f"{name!r} (from ids) has neither an image in {self.images_root} nor a mask "
                                    f"in {self.masks_root}")
            if name not in mask_files:
                hint = " (pass ids= to take only the images that have masks)" if ids is None else ""
                raise ArgumentError(f"image {image_files[name]} has no mask: {self.masks_root / name}"
                                    f"{min(mask_suffixes)} does not exist{hint}")
            if name not in image_files:
                raise self._no_image(mask_files[name], name)
            for what, repeats in (("images", image_repeats), ("masks", mask_repeats)):
                if name in repeats:
                    raise ArgumentError(f"{name!r} has several {what}: {', '.join(map(str, repeats[name]))}")
        if ids is None:
            for name in sorted(mask_files):
                if name not in image_files:
                    raise self._no_image(mask_files[name], name)
        if not names:
            raise ArgumentError(f"{self.images_root} has no images (suffixes {', '.join(sorted(image_suffixes))})")
        self.names = names
        self.samples = [(image_files[n], mask_files[n]) for n in names]

    def _no_image(self, mask: Path, name: str) -> ArgumentError:
        return ArgumentError(f"mask {mask} has no image: {self.images_root / name}.jpg (or another image "
                             f"suffix) does not exist")

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> dict[str, Any]:
        image_path, mask_path = self.samples[index]
        data, height, width = read_image(image_path)
        mask = read_class_map(mask_path, self.mask_dtype)
        if mask.shape != (height, width):
            raise ValueError(f"mask {mask_path} is {mask.shape[1]}x{mask.shape[0]} pixels but its image "
                             f"{image_path} is {width}x{height}: a mask must cover its image pixel for pixel")
        return {"image": data, "mask": mask}

    def describe(self, index: int) -> str:
        """The image and mask paths, for error messages."""
        image_path, mask_path = self.samples[index]
        return f"{image_path} with {mask_path}"

    def default_fields(self) -> dict[str, Any]:
        """The fields written when none are given: ``image``
        (:class:`~slipstream.RGBImageField`: the file's JPEG, its pixels unchanged)
        and ``mask`` (:class:`~slipstream.SegmentationMaskField` of
        ``mask_dtype``)."""
        from slipstream.fields import RGBImageField, SegmentationMaskField

        return {"image": RGBImageField(), "mask": SegmentationMaskField(dtype=self.mask_dtype)}

    def user_metadata(self) -> dict[str, Any]:
        """Stored in the file's metadata: ``classes`` and ``ignore_index``, when given."""
        meta: dict[str, Any] = {}
        if self.classes is not None:
            meta["classes"] = self.classes
        if self.ignore_index is not None:
            meta["ignore_index"] = self.ignore_index
        return meta

    def samples_for(self, fields: Mapping[str, Any]) -> NamedSamples:
        """The samples' values for ``fields``, by name, in order.

        Raises:
            ArgumentError: a field resizes images, which would leave the
                masks in the pixels of the images as they were.
        """
        return named_samples(self, fields)

    def fingerprint(self) -> str:
        """Hash of every image and mask path (relative to its folder), size
        and modification time, and of the options: changes whenever the
        dataset does."""
        digest = hashlib.sha256(repr((self.mask_dtype.str, self.classes, self.ignore_index)).encode())
        for image_path, mask_path in self.samples:
            for root, path in ((self.images_root, image_path), (self.masks_root, mask_path)):
                stat = path.stat()
                digest.update(fingerprint_line(path.relative_to(root), stat.st_size, stat.st_mtime_ns))
        return digest.hexdigest()

    def identity(self) -> dict[str, Any]:
        """What :func:`slipstream.cached` keys the dataset file by: both
        folders' resolved paths and :meth:`fingerprint`."""
        return {"segmentation": str(self.images_root.resolve()), "masks": str(self.masks_root.resolve()),
                "content": self.fingerprint()}

    def cache_name(self) -> str:
        """The image folder's name, which starts the cached file's name."""
        return self.images_root.resolve().name

    def __repr__(self) -> str:
        return f"SegmentationFolder({str(self.images_root)!r}, {str(self.masks_root)!r}, {len(self)} samples)"
