"""Image files in folder trees."""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from slipstream.errors import ArgumentError, DatasetNotFoundError, SourceWarning

JPEG_SUFFIXES = frozenset({".jpg", ".jpeg", ".jpe"})
"""File name endings taken as JPEG images (compared in lower case)."""

IMAGE_SUFFIXES = JPEG_SUFFIXES | frozenset({".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm"})
"""File name endings taken as images in an :class:`ImageFolder`."""


def find_jpegs(folder: str | Path) -> list[Path]:
    """Every JPEG file below ``folder``, recursively, sorted by path.

    Raises:
        DatasetNotFoundError: ``folder`` does not exist or is not a folder.
    """
    return _find(Path(folder), JPEG_SUFFIXES)


def require_folder(root: Path, role: str = "") -> None:
    """Raise :class:`DatasetNotFoundError` unless ``root`` is a folder,
    saying whether it does not exist or is something else; ``role`` (what
    the folder is for) is added in parentheses."""
    if root.is_dir():
        return
    problem = "is not a folder" if root.exists() else "does not exist"
    raise DatasetNotFoundError(f"{root} {problem}{f' ({role})' if role else ''}")


def _find(root: Path, suffixes: frozenset[str]) -> list[Path]:
    require_folder(root)
    return sorted(p for p in root.rglob("*") if p.suffix.lower() in suffixes and p.is_file())


def fingerprint_line(name: str | os.PathLike, *values: Any) -> bytes:
    """One file's line of a source's fingerprint: its ``name`` as the file
    system holds it (a name that is not UTF-8, which Python gives with its
    bytes as lone surrogates, goes in as those bytes; a UTF-8 one as its
    UTF-8) and ``values``, each after a NUL."""
    return os.fsencode(name) + "".join(f"\0{value}" for value in values).encode() + b"\n"


def shown_path(path: str | os.PathLike) -> str:
    """``path`` as a message shows it: a name that is not UTF-8 with its
    bytes written as ``\\x`` escapes (as it is, the text holds lone
    surrogates, which a terminal's encoder refuses)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _some(names: list[str], shown: int = 3) -> str:
    """The first ``shown`` of ``names``, quoted, and how many more, for messages."""
    listed = ", ".join(repr(name) for name in names[:shown])
    return listed + (f" and {len(names) - shown} more" if len(names) > shown else "")


class ImageFolder:
    """A folder of images, labelled by one rule wherever slipstream reads a
    folder (:func:`slipstream.write`, :func:`slipstream.cached`,
    :class:`slipstream.Loader`, ``slipstream write`` and ``slipstream demo``):

    - a classification tree, ``root/<class name>/**/<image>``, as
      torchvision's ``ImageFolder`` reads it: class names sorted, label
      ``k`` for the ``k``-th, images sorted by path within a class.  Images
      directly in ``root`` are not read, as torchvision leaves them out: a
      :class:`~slipstream.errors.SourceWarning` counts and names them.
      Every folder in ``root`` is a class, and one that holds no image is
      refused (:class:`~slipstream.errors.DatasetNotFoundError`, a
      ``FileNotFoundError`` as torchvision raises);
    - a flat folder, ``root/<image>`` with no subfolder holding an image:
      one class, named after the folder, so every image has label 0.

    ``folder[i]`` is ``(path, label)``; :meth:`user_metadata` gives the
    class names to store in the dataset file; :attr:`flat` tells which of
    the two the folder is.
    """

    def __init__(self, root: str | os.PathLike, suffixes: frozenset[str] = IMAGE_SUFFIXES) -> None:
        self.root = Path(root)
        require_folder(self.root)
        self.classes = sorted(d.name for d in self.root.iterdir() if d.is_dir())
        found = [_find(self.root / name, suffixes) for name in self.classes]
        self.samples = [(path, label) for label, paths in enumerate(found) for path in paths]
        self.flat = not self.samples
        if not self.flat:
            self._check_classes(found, suffixes)
        if self.flat:
            # No class folder holds an image: the images are all directly in root.
            self.classes = [self.root.resolve().name]
            self.samples = [(path, 0) for path in _find(self.root, suffixes)]
        if not self.samples:
            raise ArgumentError(f"{self.root} has no images, neither in class subfolders (root/<class>/<image>) nor "
                                f"directly in it (root/<image>); image suffixes: {', '.join(sorted(suffixes))}. "
                                f"Tar shards are read by slipstream.WebDataset, a LitData dataset by "
                                f"slipstream.LitData, a COCO dataset by slipstream.COCODetection")

    def _check_classes(self, found: list[list[Path]], suffixes: frozenset[str]) -> None:
        """Refuse class folders without images (``found``: each class's
        images); warn of the images directly in the root, which no class
        reads."""
        empty = [name for name, paths in zip(self.classes, found) if not paths]
        root = shown_path(self.root)
        if empty:
            raise DatasetNotFoundError(
                f"{root}: {len(empty)} of its {len(self.classes)} class folders {'hold' if len(empty) > 1 else 'holds'}"
                f" no image ({_some(empty)}; image suffixes: {', '.join(sorted(suffixes))}): every folder in a folder "
                f"of class folders is a class, and a class without images has no sample (torchvision's ImageFolder "
                f"refuses it too). Put images in it, or move it out of {root}")
        loose = sorted(p.name for p in self.root.iterdir() if p.suffix.lower() in suffixes and p.is_file())
        if loose:
            many = len(loose) > 1
            warnings.warn(f"{root}: {len(loose)} image{'s' if many else ''} directly in it ({_some(loose)}) "
                          f"{'are' if many else 'is'} left out: it is a folder of class folders, whose images are "
                          f"read from root/<class>/ only (as torchvision's ImageFolder reads it). To include "
                          f"{'them' if many else 'it'}, move {'them' if many else 'it'} into a class folder",
                          SourceWarning, stacklevel=3)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[str, int]:
        path, label = self.samples[index]
        return str(path), label

    def describe(self, index: int) -> str:
        """The image file's path, for error messages (see :func:`shown_path`)."""
        return shown_path(self.samples[index][0])

    def default_fields(self) -> dict[str, Any]:
        """The fields written when none are given: ``image`` (JPEG) and ``label`` (int)."""
        from slipstream.fields import IntField, RGBImageField

        return {"image": RGBImageField(), "label": IntField()}

    def user_metadata(self) -> dict[str, Any]:
        """Stored in the file's metadata: the class names, in label order."""
        return {"classes": self.classes}

    def samples_for(self, fields: Mapping[str, Any]) -> ImageFolder:
        """Itself: ``folder[i]`` is ``(path, label)``, the values of an
        image field and a label field."""
        return self

    def fingerprint(self) -> str:
        """Hash of every image's path (relative to the root), size and
        modification time: changes whenever the tree does."""
        digest = hashlib.sha256()
        for path, label in self.samples:
            stat = path.stat()
            digest.update(fingerprint_line(path.relative_to(self.root), label, stat.st_size, stat.st_mtime_ns))
        return digest.hexdigest()

    def identity(self) -> dict[str, Any]:
        """What :func:`slipstream.cached` keys the folder's dataset file by:
        its resolved path, :meth:`fingerprint` and the class names (which
        the file stores)."""
        return {"folder": str(self.root.resolve()), "content": self.fingerprint(), "classes": self.classes}

    def cache_name(self) -> str:
        """The folder's name, which starts its cached file's name."""
        return self.root.resolve().name

    def __repr__(self) -> str:
        kind = "flat, label 0" if self.flat else f"{len(self.classes)} classes"
        return f"ImageFolder({str(self.root)!r}, {len(self.samples)} images, {kind})"


class VideoFolder(ImageFolder):
    """A folder of videos, labelled as :class:`ImageFolder` labels images:
    Kinetics' layout, ``root/<class name>/**/<video>`` (class names sorted,
    label ``k`` for the ``k``-th), or a flat folder of videos with label 0.
    Videos are the files whose suffix is one of
    :data:`~slipstream.fields.video.VIDEO_SUFFIXES`.

    ``folder[i]`` is ``(path, label)``, the values of a
    :class:`~slipstream.fields.VideoField` and an ``IntField``.
    """

    def __init__(self, root: str | os.PathLike) -> None:
        from slipstream.fields.video import VIDEO_SUFFIXES

        super().__init__(root, VIDEO_SUFFIXES)

    def default_fields(self) -> dict[str, Any]:
        """The fields written when none are given: ``video`` and ``label`` (int)."""
        from slipstream.fields import IntField, VideoField

        return {"video": VideoField(), "label": IntField()}

    def __repr__(self) -> str:
        kind = "flat, label 0" if self.flat else f"{len(self.classes)} classes"
        return f"VideoFolder({str(self.root)!r}, {len(self.samples)} videos, {kind})"
