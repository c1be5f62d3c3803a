"""The thumbnails of docs/operations.md: each operation run through the
library on generated pictures (:mod:`slipstream.sources.synthetic`), the
input on the left and several random draws to its right.

Usage, from the repository root::

    python docs/gallery.py                  # rewrites docs/images/operations/*.png
    python docs/gallery.py cutout mixup     # only these pictures (names as in the file names)
    python docs/gallery.py --out /tmp/x     # writes somewhere else
    python docs/gallery.py --list           # the picture names

Everything is seeded, so a second run writes the same files.  How each kind
of operation runs:

* per-sample operations: ``Pipeline([ArraySource(images), op]).compile(n)``
  on copies of one picture, so that each copy draws its own parameters;
* decoders (crops, multi-crop): a small JPEG dataset written with
  :func:`slipstream.write` and read by a :class:`slipstream.Loader`;
* MixUp and CutMix: a raw-pixel dataset with labels, read by a loader with
  :class:`~slipstream.ops.MixLabels` in the label pipeline;
* torch batch augmentations: called on a uint8 batch with a seeded
  ``torch.Generator``.
"""

from __future__ import annotations

import argparse
import io
import math
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

import slipstream as ss
from slipstream.compiler import ArraySource, Pipeline
from slipstream.ops import (CenterCrop, ColorJitter, CutMix, Cutout, GaussianBlur, MixLabels, MixUp,
                            RandomBrightness, RandomContrast, RandomCrop, RandomErasing, RandomGrayscale,
                            RandomHorizontalFlip, RandomHue, RandomResizedCrop, RandomSaturation, RandomSolarize,
                            RandomTranslate, RandomVerticalFlip, Resize, multi_crop_pipelines)
from slipstream.ops import (RandomAdjustSharpness, RandomAutocontrast, RandomEqualize, RandomInvert,
                            RandomPosterize)
from slipstream.sources.synthetic import CLASSES, synthetic_image

OUT = Path(__file__).resolve().parent / "images" / "operations"
WITHOUT_ARROW = {"mixup", "cutmix"}  # pictures whose rows are not input -> outputs
DRAWS = 4            # random draws shown per operation
SMALL = (84, 112)    # (height, width) of the pictures that per-sample operations take
PHOTO = (375, 500)   # (height, width) of the stored JPEGs that decoders read
CROP = 84            # side of the decoders' square outputs
SEED = 2             # the pipelines' seed
MAX_WIDTH = 640

Tile = tuple[np.ndarray, str]
Row = list[Tile]


# ---------------------------------------------------------------- inputs


def picture(kind: str, shape: tuple[int, int] = SMALL, seed: int = 0) -> np.ndarray:
    """A generated (height, width, 3) uint8 picture of ``kind``."""
    return synthetic_image(kind, np.random.default_rng(seed), *shape)


def shrink(image: np.ndarray, height: int) -> np.ndarray:
    """``image`` scaled to ``height`` rows, for showing a stored photo next to its crops."""
    width = round(image.shape[1] * height / image.shape[0])
    return np.asarray(Image.fromarray(image).resize((width, height), Image.Resampling.LANCZOS))


def per_sample(op: object, image: np.ndarray, draws: int = DRAWS) -> list[np.ndarray]:
    """``op`` compiled into a pipeline and run on ``draws`` copies of
    ``image`` (each copy is its own sample, with its own random draws)."""
    images = np.repeat(image[None], draws, axis=0)
    compiled = Pipeline([ArraySource(images), op]).compile(draws, seed=SEED)
    return [np.array(x) for x in compiled(np.arange(draws))]


class Photos:
    """A JPEG dataset of ``copies`` copies of one generated photo, for the decoders."""

    def __init__(self, folder: Path, kind: str, seed: int, copies: int = DRAWS) -> None:
        self.image = picture(kind, PHOTO, seed)
        self.path = folder / f"{kind}.slip"
        ss.write(self.path, {"image": np.repeat(self.image[None], copies, axis=0)},
                 {"image": ss.RGBImageField(jpeg_quality=90)}, workers=0, verbose=False)
        self.copies = copies

    def load(self, pipelines: dict) -> dict[str, np.ndarray]:
        """The first batch of a loader over the copies, by output name."""
        order = ss.Order("sequential", seed=SEED)
        with ss.Loader(self.path, self.copies, pipelines, order=order, as_dict=True) as loader:
            batch = next(iter(loader))
            return {name: value.numpy().copy() for name, value in batch.items()}

    def crops(self, *ops: object) -> list[np.ndarray]:
        return list(self.load({"image": list(ops)})["image"])


def unchanged(before: np.ndarray, after: np.ndarray) -> bool:
    return before.shape == after.shape and np.array_equal(before, after)


def draws_row(image: np.ndarray, outputs: Sequence[np.ndarray], label: str = "input") -> Row:
    """The input, then each output captioned by its draw (or as unchanged)."""
    row: Row = [(image, label)]
    for k, out in enumerate(outputs, 1):
        row.append((out, f"draw {k}" + (" (unchanged)" if unchanged(image, out) else "")))
    return row


# ---------------------------------------------------------------- drawing


def font(size: int = 11) -> ImageFont.ImageFont:
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):  # Pillow without FreeType: the fixed bitmap font
        return ImageFont.load_default()


def compose(rows: Sequence[Row], arrow: bool = True) -> Image.Image:
    """One picture: rows of captioned tiles, with an arrow after each row's
    first tile (the input) when ``arrow``.  A column is as wide as its
    picture or its caption, whichever is wider."""
    margin, gap, arrow_gap, caption = 6, 8, 22, 15
    text = font()
    draw = ImageDraw.Draw(Image.new("RGB", (1, 1)))

    def width(tile: Tile) -> int:
        return max(tile[0].shape[1], math.ceil(draw.textlength(tile[1], font=text)))

    def row_width(row: Row) -> int:
        return sum(map(width, row)) + gap * (len(row) - 1) + (arrow_gap - gap if arrow and len(row) > 1 else 0)

    heights = [max(t.shape[0] for t, _ in row) + caption for row in rows]
    canvas = Image.new("RGB", (max(map(row_width, rows)) + 2 * margin, sum(heights) + gap * (len(rows) - 1)
                               + 2 * margin), "white")
    draw = ImageDraw.Draw(canvas)
    y = margin
    for row, height in zip(rows, heights):
        x = margin
        for k, tile in enumerate(row):
            image, label = tile
            draw.text((x, y), label, fill=(60, 60, 60), font=text)
            canvas.paste(Image.fromarray(np.ascontiguousarray(image)), (x, y + caption))
            x += width(tile)
            if k == 0 and arrow and len(row) > 1:
                mid = y + caption + image.shape[0] // 2
                draw.line((x + 5, mid, x + arrow_gap - 6, mid), fill=(90, 90, 90), width=2)
                draw.polygon([(x + arrow_gap - 4, mid), (x + arrow_gap - 10, mid - 5), (x + arrow_gap - 10, mid + 5)],
                             fill=(90, 90, 90))
                x += arrow_gap
            else:
                x += gap
        y += height + gap
    if canvas.width > MAX_WIDTH:
        raise ValueError(f"a gallery picture is {canvas.width} px wide, more than {MAX_WIDTH}")
    return canvas


def save(image: Image.Image, path: Path) -> int:
    """Write ``image`` as an optimised PNG with a 128-colour palette (median
    cut, no dithering: the pictures are smooth gradients and flat shapes,
    and keep their look).  Returns its size in bytes."""
    buffer = io.BytesIO()
    image.quantize(128, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(buffer, "PNG", optimize=True)
    path.write_bytes(buffer.getvalue())
    return buffer.tell()


# ---------------------------------------------------------------- the pictures


def gallery(work: Path) -> dict[str, Callable[[], list[Row]]]:
    """Picture name -> a function giving its rows.  ``work`` holds the datasets."""
    photos: dict[str, Photos] = {}

    def photo(kind: str = "ring", seed: int = 4) -> Photos:
        if kind not in photos:
            photos[kind] = Photos(work, kind, seed)
        return photos[kind]

    def simple(op: object, kind: str, seed: int = 0) -> Callable[[], list[Row]]:
        def rows() -> list[Row]:
            image = picture(kind, seed=seed)
            return [draws_row(image, per_sample(op, image))]
        return rows

    def random_resized_crop() -> list[Row]:
        p = photo()
        small = shrink(p.image, CROP)
        return [draws_row(small, p.crops(RandomResizedCrop(CROP)), "stored 375x500"),
                draws_row(small, p.crops(RandomResizedCrop(CROP, analytic=True)), "analytic=True")]

    def center_crop() -> list[Row]:
        p = photo()
        row: Row = [(shrink(p.image, CROP), "stored 375x500")]
        for ratio in (224 / 256, 0.6, 0.3):
            row.append((p.crops(CenterCrop(CROP, ratio=ratio))[0], f"ratio={ratio:.3g}"))
        return [row]

    def random_crop() -> list[Row]:
        p = photo()
        return [draws_row(shrink(p.image, CROP), p.crops(Resize(120), RandomCrop(CROP)), "stored 375x500")]

    def resize() -> list[Row]:
        p = photo()
        return [[(shrink(p.image, CROP), "stored 375x500"),
                 (p.crops(Resize((CROP, 64)))[0], "Resize((84, 64))"),
                 (p.crops(Resize((CROP, 150)))[0], "Resize((84, 150))"),
                 (p.crops(Resize(96), CenterCrop(CROP))[0], "Resize(96), CenterCrop(84)")]]

    def horizontal_flip_in_crop() -> list[Row]:
        p = photo()
        return [draws_row(shrink(p.image, CROP), p.crops(RandomResizedCrop(CROP, scale=(0.5, 1.0)),
                                                        RandomHorizontalFlip()), "stored 375x500")]

    def multi_crop() -> list[Row]:
        p = photo("cross", 3)
        small = shrink(p.image, 96)
        rows = []
        for yoked in (False, True):
            pipelines = multi_crop_pipelines(global_crops=2, global_size=96, local_crops=4, local_size=48,
                                             mean=(0, 0, 0), std=(1, 1, 1), dtype=np.float32, yoked=yoked)
            views = p.load(pipelines)
            row: Row = [(small, f"yoked={yoked}")]
            for name in [n for n, given in pipelines.items() if not isinstance(given, ss.Internal)]:
                chw = views[name][0]
                row.append(((chw.transpose(1, 2, 0) * 255).round().clip(0, 255).astype(np.uint8), name))
            rows.append(row)
        return rows

    def mixing(mix: MixUp | CutMix) -> Callable[[], list[Row]]:
        def rows() -> list[Row]:
            kinds = CLASSES[:DRAWS]
            images = np.stack([picture(kind, seed=10 + k) for k, kind in enumerate(kinds)])
            path = work / f"mix-{type(mix).__name__}.slip"
            if not path.exists():
                ss.write(path, {"image": images, "label": np.arange(DRAWS)},
                         {"image": ss.RGBImageField(write_mode="raw"), "label": ss.IntField()}, workers=0,
                         verbose=False)
            pipelines = {"image": [mix], "label": [MixLabels(mix, num_classes=len(kinds))]}
            with ss.Loader(path, DRAWS, pipelines, order=ss.Order("sequential", seed=SEED)) as loader:
                mixed, soft = (t.numpy().copy() for t in next(iter(loader)))
            captions = [f"own weight {soft[i, i]:.2f}" for i in range(DRAWS)]
            return [[(image, f"{k}: {kind}") for k, (image, kind) in enumerate(zip(images, kinds))],
                    list(zip(mixed, captions))]
        return rows

    def batch_op(make: Callable[[object], object], kind: str, seed: int = 0) -> Callable[[], list[Row]]:
        def rows() -> list[Row]:
            import torch

            image = picture(kind, seed=seed)
            x = torch.from_numpy(np.repeat(image[None], DRAWS, 0)).permute(0, 3, 1, 2).contiguous()
            out = make(torch.Generator().manual_seed(SEED))(x)
            return [draws_row(image, list(out.permute(0, 2, 3, 1).numpy()))]
        return rows

    from slipstream.ops import batch

    return {
        "random_resized_crop": random_resized_crop,
        "center_crop": center_crop,
        "random_crop": random_crop,
        "resize": resize,
        "random_horizontal_flip": simple(RandomHorizontalFlip(), "stripes", 1),
        "random_horizontal_flip_in_crop": horizontal_flip_in_crop,
        "random_vertical_flip": simple(RandomVerticalFlip(), "stripes", 1),
        "random_translate": simple(RandomTranslate(16), "triangle", 2),
        "color_jitter": simple(ColorJitter(0.4, 0.4, 0.4, 0.1), "circle", 3),
        "random_brightness": simple(RandomBrightness(0.5), "circle", 3),
        "random_contrast": simple(RandomContrast(0.6), "circle", 3),
        "random_saturation": simple(RandomSaturation(0.8), "circle", 3),
        "random_hue": simple(RandomHue(0.5), "circle", 3),
        "random_grayscale": simple(RandomGrayscale(p=0.5), "square", 4),
        "random_solarize": simple(RandomSolarize(threshold=128, p=0.5), "square", 4),
        "gaussian_blur": simple(GaussianBlur(9, sigma=(0.1, 3.0)), "stripes", 5),
        "random_posterize": simple(RandomPosterize(2, p=0.5), "circle", 3),
        "random_equalize": simple(RandomEqualize(p=0.5), "circle", 3),
        "random_autocontrast": simple(RandomAutocontrast(p=0.5), "circle", 3),
        "random_adjust_sharpness": simple(RandomAdjustSharpness(8.0, p=0.5), "stripes", 5),
        "random_invert": simple(RandomInvert(p=0.5), "square", 4),
        "random_erasing": simple(RandomErasing(p=1.0), "ring", 6),
        "cutout": simple(Cutout(32), "ring", 6),
        "mixup": mixing(MixUp(alpha=1.0)),
        "cutmix": mixing(CutMix(alpha=1.0)),
        "multi_crop": multi_crop,
        "batch_color_jitter": batch_op(lambda g: batch.BatchColorJitter(0.4, 0.4, 0.4, 0.1, generator=g),
                                       "circle", 3),
        "batch_random_grayscale": batch_op(lambda g: batch.BatchRandomGrayscale(p=0.5, generator=g), "square", 4),
        "batch_random_solarize": batch_op(lambda g: batch.BatchRandomSolarize(p=0.5, generator=g), "square", 4),
        "batch_gaussian_blur": batch_op(lambda g: batch.BatchGaussianBlur(9, sigma=(0.1, 3.0), generator=g),
                                        "stripes", 5),
        "batch_random_erasing": batch_op(lambda g: batch.BatchRandomErasing(p=1.0, generator=g), "ring", 6),
        "batch_random_zoom": batch_op(lambda g: batch.BatchRandomZoom(x=(0.3, 0.7), y=(0.3, 0.7), p=1.0, generator=g),
                                      "stripes", 5),
        "batch_rotate_object": batch_op(lambda g: batch.BatchRotateObject(p=1.0, generator=g), "triangle", 2),
        "batch_fixed_optical_distortion": batch_op(lambda g: batch.BatchFixedOpticalDistortion(-0.5), "stripes", 5),
        "batch_patch_shuffle": batch_op(lambda g: batch.BatchPatchShuffle((0.5, 0.25), p=1.0, generator=g),
                                        "circle", 3),
        "batch_yiq_color_jitter": batch_op(lambda g: batch.BatchYIQColorJitter(0.4, 0.4, 0.4, 60, generator=g),
                                           "circle", 3),
        "batch_circular_mask": batch_op(lambda g: batch.BatchCircularMask(8.0), "stripes", 5),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="pictures to write (default: all)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"output folder (default: {OUT})")
    parser.add_argument("--list", action="store_true", help="print the picture names and exit")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="slipstream-gallery-") as work:
        pictures = gallery(Path(work))
        if args.list:
            print("\n".join(pictures))
            return 0
        unknown = sorted(set(args.names) - set(pictures))
        if unknown:
            parser.error(f"unknown pictures {unknown}; known: {', '.join(pictures)}")
        args.out.mkdir(parents=True, exist_ok=True)
        total = 0
        for name in args.names or list(pictures):
            path = args.out / f"{name}.png"
            size = save(compose(pictures[name](), arrow=name not in WITHOUT_ARROW), path)
            total += size
            print(f"{path}  {size / 1000:.1f} kB")
        print(f"{total / 1000:.1f} kB in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
