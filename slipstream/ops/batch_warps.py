"""Geometric torch batch augmentations: each image of a (batch, channels,
height, width) batch resampled through its own map, all of them in one
``grid_sample`` call.  Import them from :mod:`slipstream.ops.batch`.

The maps follow the compiled warps of :mod:`slipstream.ops.warps` (Pillow's
conventions, which torchvision's PIL path uses): output pixel (x, y) is
centred on (x + 0.5, y + 0.5) and comes from the input point that the
inverse map gives; ``"nearest"`` takes the input pixel containing that
point, ``"bilinear"`` blends the four pixel centres around it, edges
clamped; where the point falls outside the input the pixel is ``fill`` (or,
with ``padding_mode="edge"``, the nearest edge pixel).  The matrices are
torchvision's ``_get_inverse_affine_matrix`` and ``_get_perspective_coeffs``
(torchvision/transforms/functional.py), computed for the whole batch in
float64, and the parameters are drawn as the compiled operations draw them
(the same draw numbers of the same keys give the same angles, shifts and
corners).  Unlike Pillow, a bilinear value is rounded, not truncated, when a
uint8 batch is converted back.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from slipstream.compiler import random as rnd
from slipstream.compiler.kinds import Geometry
from slipstream.compiler.params import checked_for
from slipstream.errors import ArgumentError
from slipstream.ops import warps
from slipstream.ops.batch_base import (Params, _back, _BatchAugmentation, _checked, _Draws, _float, _is_number,
                                       _numbers, _probability, _where)

_PADDINGS = ("constant", "edge")
_ZOOM_DRAWS = rnd.named_draws("apply", "zoom", "x", "y")
_ROTATE_OBJECT_DRAWS = rnd.named_draws("apply", "angle", "ctr_x", "ctr_y", "scale", "dest_x", "dest_y")
_SHUFFLE_DRAWS = rnd.named_draws("apply", "size", "ranks")  # ranks + j: patch j's rank

# ---------------------------------------------------------------- arguments


def _fill(value: Any) -> tuple[float, ...]:
    """A fill colour on the batch's 0..1 scale: a number, or one per channel."""
    values = _numbers(value)
    if not values or not all(_is_number(v) and math.isfinite(v) for v in values):
        raise ArgumentError(f"fill must be a finite number or one finite number per channel (on the 0..1 scale of "
                            f"the batch's values), got {value!r}")
    return tuple(float(v) for v in values)


def _padding(value: Any) -> str:
    if value not in _PADDINGS:
        raise ArgumentError(f"padding_mode must be one of {', '.join(_PADDINGS)} (fill the outside with `fill`, or "
                            f"repeat the nearest edge pixel), got {value!r}")
    return value


def _span(name: str, value: Any, positive: bool = False) -> tuple[float, float]:
    """A number v (the range (v, v)) or a (low, high) pair, finite, low <= high,
    both > 0 when ``positive``."""
    pair = (value, value) if _is_number(value) else _numbers(value)
    if len(pair) != 2 or not all(_is_number(v) and math.isfinite(v) for v in pair) or \
            pair[0] > pair[1] or (positive and pair[0] <= 0):
        kind = "positive " if positive else ""
        raise ArgumentError(f"{name} must be a {kind}number or a (low, high) pair of {kind}numbers with low <= high, "
                            f"got {value!r}")
    return (float(pair[0]), float(pair[1]))


# ---------------------------------------------------------------- the maps


def affine_inverse(center: torch.Tensor, angle: torch.Tensor, translate: torch.Tensor, scale: torch.Tensor,
                   shear: torch.Tensor) -> torch.Tensor:
    """torchvision's ``_get_inverse_affine_matrix`` for each image, as
    :func:`slipstream.ops.warps.affine_inverse` computes it for one: (B, 8)
    float64 coefficients of Pillow's PERSPECTIVE form (the last two 0), from
    ``center`` and ``translate`` (B, 2) in pixels, ``angle`` (B,) degrees
    (clockwise in image coordinates), ``scale`` (B,) and ``shear`` (B, 2)
    degrees, all float64."""
    rot, sx, sy = torch.deg2rad(angle), torch.deg2rad(shear[:, 0]), torch.deg2rad(shear[:, 1])
    a = torch.cos(rot - sy) / torch.cos(sy)
    b = -torch.cos(rot - sy) * torch.tan(sx) / torch.cos(sy) - torch.sin(rot)
    c = torch.sin(rot - sy) / torch.cos(sy)
    d = -torch.sin(rot - sy) * torch.tan(sx) / torch.cos(sy) + torch.cos(rot)
    m0, m1, m3, m4 = d / scale, -b / scale, -c / scale, a / scale
    cx, cy = center.unbind(1)
    tx, ty = translate.unbind(1)
    m2 = m0 * (-cx - tx) + m1 * (-cy - ty) + cx
    m5 = m3 * (-cx - tx) + m4 * (-cy - ty) + cy
    zero = torch.zeros_like(m0)
    return torch.stack([m0, m1, m2, m3, m4, m5, zero, zero], 1)


def rotation_inverse(center: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Pillow's ``Image.rotate`` map for ``angle`` (B,) degrees
    counter-clockwise about ``center`` (B, 2) pixels: torchvision's affine
    matrix of the opposite angle, (B, 8) float64."""
    none = torch.zeros_like(center)
    return affine_inverse(center, -angle, none, torch.ones_like(angle), none)


def perspective_coefficients(ends: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """torchvision's ``_get_perspective_coeffs`` from the image's corners
    to ``ends`` ((B, 4, 2) x, y: top-left, top-right, bottom-right,
    bottom-left) for each image, solved in float64 and rounded to float32 as
    torchvision rounds them, as :func:`slipstream.ops.warps.perspective_coefficients`
    solves them one by one; (B, 8) float64."""
    n = ends.shape[0]
    starts = torch.tensor([[0, 0], [width - 1, 0], [width - 1, height - 1], [0, height - 1]],
                          dtype=torch.float64, device=ends.device).expand(n, 4, 2)
    ex, ey = ends.double().unbind(2)
    sx, sy = starts.unbind(2)
    one, zero = torch.ones_like(ex), torch.zeros_like(ex)
    x_rows = torch.stack([ex, ey, one, zero, zero, zero, -sx * ex, -sx * ey], 2)
    y_rows = torch.stack([zero, zero, zero, ex, ey, one, -sy * ex, -sy * ey], 2)
    system = torch.stack([x_rows, y_rows], 2).reshape(n, 8, 8)
    targets = torch.stack([sx, sy], 2).reshape(n, 8, 1)
    return torch.linalg.solve(system, targets).squeeze(2).float().double()


def _pixel_centres(height: int, width: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(1, 1, W) x and (1, H, 1) y of the output pixels' centres, float64."""
    xs = torch.arange(width, dtype=torch.float64, device=device).view(1, 1, width) + 0.5
    ys = torch.arange(height, dtype=torch.float64, device=device).view(1, height, 1) + 0.5
    return xs, ys


def projective_points(coefficients: torch.Tensor, height: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The input point (u, v) of every output pixel's centre through
    Pillow's PERSPECTIVE map of each image ((B, 8) coefficients), (B, H, W)
    float64 each; NaN where the map's denominator is 0."""
    xs, ys = _pixel_centres(height, width, coefficients.device)
    a = coefficients.view(-1, 8, 1, 1).unbind(1)
    den = a[6] * xs + a[7] * ys + 1.0
    den = torch.where(den == 0, torch.full_like(den, math.nan), den)
    return (a[0] * xs + a[1] * ys + a[2]) / den, (a[3] * xs + a[4] * ys + a[5]) / den


def resample(y: torch.Tensor, u: torch.Tensor, v: torch.Tensor, nearest: bool, fill: tuple[float, ...] | None,
             name: str) -> torch.Tensor:
    """``y`` (float, (B, C, H, W)) sampled at input points ``u``, ``v``
    ((B or 1, H', W') float64 pixels, origin at the top-left corner) by one
    ``grid_sample``: the pixel containing the point (``nearest``) or the four
    pixel centres around it, edges clamped; outside the input (or at a NaN
    point) ``fill`` (on the 0..1 scale, one value or one per channel), or the
    nearest edge pixel when ``fill`` is None.  ``name`` is the operation's,
    for errors."""
    n, c, h, w = y.shape
    if fill is not None and len(fill) not in (1, c):
        raise ArgumentError(f"{name}: fill {fill} has {len(fill)} values for images of {c} channels (give one, or "
                            f"one per channel)")
    outside = ~((u >= 0) & (u < w) & (v >= 0) & (v < h))  # NaN compares false: outside
    u, v = torch.nan_to_num(u, nan=0.0), torch.nan_to_num(v, nan=0.0)
    if nearest:  # the centre of the pixel holding the point: grid_sample's rounding then picks that pixel
        u, v = torch.floor(u) + 0.5, torch.floor(v) + 0.5
    sampling = y if y.dtype in (torch.float32, torch.float64) else y.float()  # grid_sample's CPU half is inexact
    grid = torch.stack([u * (2.0 / w) - 1.0, v * (2.0 / h) - 1.0], -1).to(sampling.dtype)
    out = F.grid_sample(sampling, grid.expand(n, *grid.shape[1:]), mode="nearest" if nearest else "bilinear",
                        padding_mode="border", align_corners=False)
    if fill is not None:
        colour = torch.tensor(fill, dtype=out.dtype, device=out.device).view(1, -1, 1, 1)
        out = torch.where(outside.unsqueeze(1), colour, out)
    return out.to(y.dtype)


# ---------------------------------------------------------------- the operations


class _Warp(_BatchAugmentation):
    """A map per image, given by :meth:`points`; images whose ``apply``
    parameter (when there is one) is False are left as they are."""

    geometry: ClassVar[Geometry] = Geometry.UNTRACKED

    def __init__(self, interpolation: Any, fill: Any, padding_mode: str = "constant",
                 generator: torch.Generator | None = None) -> None:
        super().__init__(generator)
        self.nearest = warps.interpolation_name(interpolation) == "nearest"
        self.fill = _fill(fill) if _padding(padding_mode) == "constant" else None

    def points(self, params: Params, height: int, width: int,
               device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """The input point (u, v) of each output pixel, (B or 1, H, W) float64 on ``device``."""
        raise NotImplementedError

    def apply(self, x: torch.Tensor, params: Params) -> torch.Tensor:
        y, was_uint8 = _float(x)
        u, v = self.points(params, y.shape[2], y.shape[3], y.device)
        out = resample(y, u, v, self.nearest, self.fill, type(self).__name__)
        if "apply" in params:
            out = _where(params["apply"].to(y.device), out, y)
        return _back(out, was_uint8)


class _Projective(_Warp):
    """A warp given by Pillow's 8 coefficients per image (:meth:`coefficients`)."""

    def coefficients(self, params: Params, height: int, width: int) -> torch.Tensor:
        """(B, 8) float64 inverse maps, output pixel centre to input point."""
        raise NotImplementedError

    def points(self, params: Params, height: int, width: int,
               device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        return projective_points(self.coefficients(params, height, width).to(device), height, width)


def _centres(center: tuple[float, float] | None, like: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """(B, 2) float64 centres in pixels: ``center``, or the image's centre
    ``(width * 0.5, height * 0.5)`` when it is None."""
    point = center if center is not None else (width * 0.5, height * 0.5)
    return torch.tensor(point, dtype=torch.float64, device=like.device).expand(like.shape[0], 2)


class BatchRandomRotation(_Projective):
    """torchvision's ``RandomRotation`` per image: an angle drawn uniformly
    from ``degrees`` (a number d means (-d, d)), counter-clockwise about
    ``center`` ((x, y) pixels; None: the image's centre), ``fill`` (on the
    0..1 scale) where no input pixel lands; the map of
    :class:`~slipstream.ops.RandomRotation`, whose draw it repeats."""

    def __init__(self, degrees: Any, interpolation: Any = "nearest", expand: bool = False, center: Any = None,
                 fill: Any = 0.0, generator: torch.Generator | None = None) -> None:
        # checks and normalizes them, naming this class
        spec = checked_for(type(self).__name__,
                           lambda: warps.RandomRotation(degrees, interpolation, expand, center))
        super().__init__(spec.interpolation, fill, generator=generator)
        self.degrees, self.center = spec.degrees, spec.center

    def draw(self, x: torch.Tensor, draws: _Draws) -> Params:
        return {"angle": draws.uniform64(warps.ROTATION_DRAWS.angle, *self.degrees)}

    def coefficients(self, params: Params, height: int, width: int) -> torch.Tensor:
        angle = params["angle"].double()
        return rotation_inverse(_centres(self.center, angle, height, width), angle)


class BatchRandomAffine(_Projective):
    """torchvision's ``RandomAffine`` per image: an angle from ``degrees``,
    a shift of up to ``translate`` (fractions of the width and height,
    rounded to whole pixels), a scale from ``scale`` and shears from
    ``shear``, drawn as :class:`~slipstream.ops.RandomAffine` draws them,
    about ``center`` (None: the image's centre); torchvision's inverse
    matrix."""

    def __init__(self, degrees: Any, translate: Any = None, scale: Any = None, shear: Any = None,
                 interpolation: Any = "nearest", fill: Any = 0.0, center: Any = None,
                 generator: torch.Generator | None = None) -> None:
        self.spec = checked_for(type(self).__name__,
                                lambda: warps.RandomAffine(degrees, translate, scale, shear, interpolation, 0, center))
        super().__init__(self.spec.interpolation, fill, generator=generator)

    def draw(self, x: torch.Tensor, draws: _Draws) -> Params:
        spec, (h, w), named = self.spec, x.shape[2:], warps.AFFINE_DRAWS
        zero = torch.zeros(x.shape[0], dtype=torch.float64, device=x.device)
        tx = ty = zero
        if spec.translate is not None:
            # torch.round: half to even, as Python's round
            tx = torch.round(draws.uniform64(named.shift_x, -spec.translate[0] * w, spec.translate[0] * w))
            ty = torch.round(draws.uniform64(named.shift_y, -spec.translate[1] * h, spec.translate[1] * h))
        shear = spec.shear if spec.shear is not None else (0.0, 0.0)
        return {"angle": draws.uniform64(named.angle, *spec.degrees), "translate": torch.stack([tx, ty], 1),
                "scale": draws.uniform64(named.scale, *spec.scale) if spec.scale is not None else zero + 1.0,
                "shear": torch.stack([
                    draws.uniform64(named.shear_x, shear[0], shear[1]) if spec.shear is not None else zero,
                    draws.uniform64(named.shear_y, shear[2], shear[3]) if len(shear) == 4 else zero], 1)}

    def coefficients(self, params: Params, height: int, width: int) -> torch.Tensor:
        angle = params["angle"].double()
        return affine_inverse(_centres(self.spec.center, angle, height, width), angle, params["translate"].double(),
                              params["scale"].double(), params["shear"].double())


class BatchRandomPerspective(_Projective):
    """torchvision's ``RandomPerspective`` per image: with probability
    ``p``, each corner moved inwards by a random whole number of pixels up
    to ``distortion_scale`` of half the width and height, drawn as
    :class:`~slipstream.ops.RandomPerspective` draws them; the image's
    corners are mapped onto the moved ones.  The corners are pixels of the
    batch they were drawn for: replay them on views of the same size."""

    def __init__(self, distortion_scale: float = 0.5, p: float = 0.5, interpolation: Any = "bilinear",
                 fill: Any = 0.0, generator: torch.Generator | None = None) -> None:
        spec = checked_for(type(self).__name__,
                           lambda: warps.RandomPerspective(distortion_scale, p, interpolation))
        super().__init__(spec.interpolation, fill, generator=generator)
        self.distortion_scale, self.p = spec.distortion_scale, spec.p

    def draw(self, x: torch.Tensor, draws: _Draws) -> Params:
        h, w = x.shape[2:]
        bound_w, bound_h = int(self.distortion_scale * (w // 2)) + 1, int(self.distortion_scale * (h // 2)) + 1
        ranges = [(0, bound_w), (0, bound_h), (w - bound_w, w), (0, bound_h), (w - bound_w, w), (h - bound_h, h),
                  (0, bound_w), (h - bound_h, h)]  # top-left, top-right, bottom-right, bottom-left; x then y
        named = warps.PERSPECTIVE_DRAWS
        corners = [draws.integers(named.corner + k, low, high) for k, (low, high) in enumerate(ranges)]
        return {"apply": draws.rand(named.apply) < self.p, "ends": torch.stack(corners, 1).view(-1, 4, 2)}

    def coefficients(self, params: Params, height: int, width: int) -> torch.Tensor:
        return perspective_coefficients(params["ends"], height, width)


class BatchRandomZoom(_Projective):
    """The original slipstream's ``RandomZoom``: with probability ``p``, each
    image magnified about a point: the output shows the part of the input of
    ``zoom`` times its width and height (drawn from ``zoom``) around the
    point (``x``, ``y``) (fractions of the width and height, each a number or
    a range to draw from), which stays in place."""

    def __init__(self, zoom: Any = (0.5, 1.0), x: Any = 0.5, y: Any = 0.5, p: float = 0.5,
                 interpolation: Any = "bilinear", padding_mode: str = "constant", fill: Any = 0.0,
                 generator: torch.Generator | None = None) -> None:
        super().__init__(interpolation, fill, padding_mode, generator)
        self.zoom, self.x, self.y = _span("zoom", zoom, positive=True), _span("x", x), _span("y", y)
        self.p = _probability(p)

    def draw(self, x: torch.Tensor, draws: _Draws) -> Params:
        named = _ZOOM_DRAWS
        point = torch.stack([draws.uniform64(named.x, *self.x), draws.uniform64(named.y, *self.y)], 1)
        return {"apply": draws.rand(named.apply) < self.p, "zoom": draws.uniform64(named.zoom, *self.zoom),
                "point": point}

    def coefficients(self, params: Params, height: int, width: int) -> torch.Tensor:
        zoom = params["zoom"].double()
        centre = params["point"].double() * torch.tensor([width, height], dtype=torch.float64, device=zoom.device)
        none = torch.zeros_like(centre)
        return affine_inverse(centre, torch.zeros_like(zoom), none, 1.0 / zoom, none)


class BatchRotateObject(_Projective):
    """The original slipstream's ``RandomRotateObject``: with probability
    ``p``, the object around (``ctr_x``, ``ctr_y``) is rotated by an angle
    from ``degrees`` (counter-clockwise; a number d means (-d, d)), shown at
    ``1 / scale`` of its size (``scale`` drawn from its range, as a zoom's)
    and moved to (``dest_x``, ``dest_y``); positions are fractions of the
    width and height, each a number or a range to draw from."""

    def __init__(self, degrees: Any = 45.0, ctr_x: Any = 0.5, ctr_y: Any = 0.5, scale: Any = (1.0, 2.0),
                 dest_x: Any = (0.25, 0.75), dest_y: Any = (0.25, 0.75), p: float = 0.5,
                 interpolation: Any = "bilinear", padding_mode: str = "edge", fill: Any = 0.0,
                 generator: torch.Generator | None = None) -> None:
        super().__init__(interpolation, fill, padding_mode, generator)
        self.degrees = warps.RandomRotation(degrees).degrees
        self.ranges = {"ctr_x": _span("ctr_x", ctr_x), "ctr_y": _span("ctr_y", ctr_y),
                       "scale": _span("scale", scale, positive=True), "dest_x": _span("dest_x", dest_x),
                       "dest_y": _span("dest_y", dest_y)}
        self.p = _probability(p)

    def draw(self, x: torch.Tensor, draws: _Draws) -> Params:
        named = _ROTATE_OBJECT_DRAWS
        params = {"apply": draws.rand(named.apply) < self.p, "angle": draws.uniform64(named.angle, *self.degrees)}
        params.update({name: draws.uniform64(getattr(named, name), *span) for name, span in self.ranges.items()})
        return params

    def coefficients(self, params: Params, height: int, width: int) -> torch.Tensor:
        angle = params["angle"].double()
        size = torch.tensor([width, height], dtype=torch.float64, device=angle.device)
        centre = torch.stack([params["ctr_x"], params["ctr_y"]], 1).double() * size
        destination = torch.stack([params["dest_x"], params["dest_y"]], 1).double() * size
        shear = torch.zeros_like(centre)
        return affine_inverse(centre, -angle, destination - centre, 1.0 / params["scale"].double(), shear)


class BatchFixedOpticalDistortion(_Warp):
    """The original slipstream's ``FixedOpticalDistortion``: the same radial
    lens distortion of every image.  An output pixel at offset (nx, ny) from
    the distortion's centre (the image's centre moved by ``dx``, ``dy``
    pixels), in units of the width and height, shows the input at offset
    (nx, ny) * (1 + k r^2 + k r^4), ``r^2 = nx^2 + ny^2``, ``k`` the
    ``distortion``: negative values sample nearer the centre towards the
    edges, positive ones farther out."""

    def __init__(self, distortion: float = -0.5, dx: float = 0.0, dy: float = 0.0, interpolation: Any = "bilinear",
                 padding_mode: str = "constant", fill: Any = 0.0) -> None:
        super().__init__(interpolation, fill, padding_mode)
        values = {"distortion": distortion, "dx": dx, "dy": dy}
        for name, value in values.items():
            if not _is_number(value) or not math.isfinite(value):
                raise ArgumentError(f"{name} must be a finite number, got {value!r}")
        self.distortion, self.dx, self.dy = float(distortion), float(dx), float(dy)

    def draw(self, x: torch.Tensor, draws: _Draws) -> Params:
        return {}

    def points(self, params: Params, height: int, width: int,
               device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        xs, ys = _pixel_centres(height, width, device)
        cx, cy = width * 0.5 + self.dx, height * 0.5 + self.dy
        nx, ny = (xs - cx) / width, (ys - cy) / height
        r2 = nx * nx + ny * ny
        factor = 1.0 + self.distortion * r2 + self.distortion * r2 * r2
        return cx + nx * factor * width, cy + ny * factor * height


class BatchPatchShuffle(_BatchAugmentation):
    """The original slipstream's ``RandomPatchShuffle``: with probability
    ``p``, each image cut into a grid of patches, of a side drawn per image
    from ``sizes`` (fractions of the height and width), and the patches put
    back in a random order (a strip at the right or bottom that no whole
    patch covers stays in place).  The order is drawn for the batch's size:
    replay it on views of the same size."""

    geometry: ClassVar[Geometry] = Geometry.UNTRACKED

    def __init__(self, sizes: Any, p: float = 0.5, generator: torch.Generator | None = None) -> None:
        super().__init__(generator)
        self.sizes = tuple(float(s) if _is_number(s) else s for s in _numbers(sizes))
        if not self.sizes or not all(_is_number(s) and 0 < s <= 1 for s in self.sizes):
            raise ArgumentError(f"sizes must be a fraction in (0, 1] or a sequence of them (the patch's side as a "
                                f"fraction of the image's), got {sizes!r}")
        self.p = _probability(p)

    def grid(self, size: float, height: int, width: int) -> tuple[int, int, int, int]:
        """(rows, columns, patch height, patch width) of the patches of ``size``."""
        ph, pw = max(1, int(size * height)), max(1, int(size * width))
        return height // ph, width // pw, ph, pw

    def draw(self, x: torch.Tensor, draws: _Draws) -> Params:
        counts = [rows * columns for rows, columns, _, _ in (self.grid(s, *x.shape[2:]) for s in self.sizes)]
        named = _SHUFFLE_DRAWS
        return {"apply": draws.rand(named.apply) < self.p, "size": draws.integers(named.size, 0, len(self.sizes)),
                "ranks": draws.rows(named.ranks, max(counts))}

    def apply(self, x: torch.Tensor, params: Params) -> torch.Tensor:
        out = _checked(x)
        for index, size in enumerate(self.sizes):
            shuffled = self.shuffle(x, params["ranks"], *self.grid(size, *x.shape[2:]))
            out = _where(params["apply"] & (params["size"] == index), shuffled, out)
        return out

    def shuffle(self, x: torch.Tensor, ranks: torch.Tensor, rows: int, columns: int, ph: int,
                pw: int) -> torch.Tensor:
        """Every image with its ``rows`` x ``columns`` patches reordered:
        output patch j is input patch ``argsort(ranks[:, :count])[j]``."""
        n, c = x.shape[:2]
        count = rows * columns
        if count > ranks.shape[1]:
            raise ArgumentError(f"BatchPatchShuffle: the parameters order {ranks.shape[1]} patches, this batch of "
                                f"{tuple(x.shape)} has {count}: replay them on views of the size they were drawn for")
        order = ranks[:, :count].argsort(1).to(x.device)
        region = x[:, :, :rows * ph, :columns * pw].reshape(n, c, rows, ph, columns, pw)
        patches = region.permute(0, 1, 2, 4, 3, 5).reshape(n, c, count, ph, pw)
        patches = patches.gather(2, order.view(n, 1, count, 1, 1).expand(n, c, count, ph, pw))
        out = x.clone()
        out[:, :, :rows * ph, :columns * pw] = patches.view(n, c, rows, columns, ph, pw).permute(
            0, 1, 2, 4, 3, 5).reshape(n, c, rows * ph, columns * pw)
        return out
