"""The item function ``litdata.optimize`` runs in its worker processes
(which import it by module name, so it lives in a module of its own)."""

from __future__ import annotations


def image_and_label(item: tuple[str, int]) -> dict:
    """``{"image": the JPEG file as a PIL image, "label": 3 * k}`` for ``(path, k)``."""
    from PIL import Image

    path, k = item
    return {"image": Image.open(path), "label": 3 * k}
