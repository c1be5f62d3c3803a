"""Image files in folder trees."""

from __future__ import annotations

from pathlib import Path

JPEG_SUFFIXES = frozenset({".jpg", ".jpeg", ".jpe"})
"""File name endings taken as JPEG images (compared in lower case)."""


def find_jpegs(folder: str | Path) -> list[Path]:
    """Every JPEG file below ``folder``, recursively, sorted by path.

    Raises:
        FileNotFoundError: ``folder`` does not exist or is not a folder.
    """
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder")
    return sorted(p for p in root.rglob("*") if p.suffix.lower() in JPEG_SUFFIXES and p.is_file())
