"""Every operation declares how it moves pixels, and boxes that follow an
image either move exactly as its pixels move or are refused by name.

Each operation of the library (``slipstream.ops``, the torch batch
augmentations of ``slipstream.ops.batch``, and ``RandomApply``) is run in
an image pipeline that a :class:`BoundingBoxes` field follows, over images
of one coloured rectangle on black.  Where the pipeline is accepted, every
kept box must bound the pixels that still show the rectangle; where it is
refused, the error must name the operation and the operation must have
declared a geometry nothing can follow.
"""

from __future__ import annotations

import io
import inspect

import numpy as np
import pytest
import torch
from PIL import Image

import slipstream as ss
from slipstream import ops
from slipstream.compiler import Geometry, Operation, RandomApply, params
from slipstream.compiler.rewrites import FieldOperation
from slipstream.ops import batch as batch_ops
from slipstream.ops.detection import BoundingBoxes, Count, KeptWithBoxes

SIZE = 64
"""Side of the (square) images every pipeline makes."""

COLOUR = np.array([200, 90, 140], np.uint8)
"""The rectangle's colour: no channel at 0 or 255, so that no tone
operation (inverting, solarizing, posterizing) turns it into the black
background or the black fill of a warp."""

NOT_IMAGE_OPERATIONS = {
    "BoundingBoxes": "follows an image itself",
    "KeptWithBoxes": "selects rows of kept boxes",
    "Keypoints": "follows an image itself",
    "InstanceMasks": "follows an image itself",
    "SegmentationMask": "follows an image itself",
    "Count": "counts kept boxes",
    "TrimToCounts": "trims padded rows",
    "MixLabels": "mixes labels, not pixels",
    "VideoWindow": "decodes a video field (no field follows its frames)",
    "SequenceWindow": "decodes windows of images (no field follows their frames; tests/test_sequence_windows.py)",
    "StoredBytes": "hands the stored bytes, decoding nothing",
    "ResolutionSchedule": "a crop's argument, not an operation",
    "MultiCrop": "makes several image outputs, each a crop decoder tested as RandomResizedCrop",
    "DecodeOnDevice": "decodes on a CUDA device (tests/test_device_decode.py follows it)",
}
"""Classes of ``slipstream.ops`` that are not applied to an image's pixels."""


class Rectangles:
    """``count`` images (JPEG, quality 100, no chroma subsampling) of one
    rectangle of :data:`COLOUR` on black, at a different place in each,
    with its box (XYXY)."""

    def __init__(self, count: int) -> None:
        rng = np.random.default_rng(11)
        self.samples = []
        for _ in range(count):
            h, w = int(rng.integers(90, 140)), int(rng.integers(90, 140))
            bh, bw = int(rng.integers(h // 5, h // 3)), int(rng.integers(w // 5, w // 3))
            y0, x0 = int(rng.integers(h // 8, h - bh - h // 8)), int(rng.integers(w // 8, w - bw - w // 8))
            image = np.zeros((h, w, 3), np.uint8)
            image[y0:y0 + bh, x0:x0 + bw] = COLOUR
            data = io.BytesIO()
            Image.fromarray(image).save(data, "JPEG", quality=100, subsampling=0)
            self.samples.append((data.getvalue(), np.array([[x0, y0, x0 + bw, y0 + bh]], np.float32),
                                 np.array([1], np.int64)))

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int):
        return self.samples[i]


@pytest.fixture(scope="module")
def rectangles(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("geometry") / "rectangles.slip")
    fields = {"image": ss.RGBImageField(), "boxes": ss.RaggedField(np.float32, (4,)),
              "labels": ss.RaggedField(np.int64)}
    ss.write(path, Rectangles(16), fields, verbose=False)
    return path


MODEST = {"Cutout": {"size": 12}, "RandomTranslate": {"padding": 12}}
"""Arguments whose declared examples would move or cover a whole image."""


def example(cls: type, **given: object) -> object:
    """An instance of ``cls`` from the examples of its declared arguments
    (or :data:`MODEST` ones), applied to every sample where it has a
    probability ``p``."""
    arguments = {entry.name: entry.param.domain.example() for entry in params.declared(cls)
                 if entry.default is params.REQUIRED}
    arguments.update(MODEST.get(cls.__name__, {}))
    if "p" in {entry.name for entry in params.declared(cls)}:
        arguments["p"] = 1.0
    return cls(**{**arguments, **given})


def library_classes() -> dict[str, type]:
    """Every class of ``slipstream.ops`` a pipeline entry is made of."""
    found = {}
    for name in ops.__all__:
        obj = getattr(ops, name)
        if isinstance(obj, type) and issubclass(obj, (Operation, FieldOperation, params.Declares, ss.compiler.Node)):
            found[name] = obj
    return found


CLASSES = library_classes()
FIRST = {name for name, cls in CLASSES.items() if issubclass(cls, FieldOperation) and name not in NOT_IMAGE_OPERATIONS}
"""Operations that decode the image field, so stand first in its pipeline."""
AFTER = sorted(name for name, cls in CLASSES.items()
               if issubclass(cls, Operation) and name not in NOT_IMAGE_OPERATIONS)
"""Operations applied to a decoded image."""
TORCH_MODULES = sorted(name for name in batch_ops.__all__
                       if isinstance(getattr(batch_ops, name), type)
                       and issubclass(getattr(batch_ops, name), torch.nn.Module))


def torch_module(name: str) -> torch.nn.Module:
    """The batch augmentation ``name`` with the arguments its tests give
    it where it requires some, applied to every image."""
    cls = getattr(batch_ops, name)
    required = {p.name for p in inspect.signature(cls).parameters.values() if p.default is inspect.Parameter.empty}
    given = {"sizes": 0.25, "degrees": 40, "kernel_size": 5, "sharpness_factor": 2.0, "bits": 3}
    arguments: dict[str, object] = {parameter: given[parameter] for parameter in required}
    if "p" in inspect.signature(cls).parameters:
        arguments["p"] = 1.0
    return cls(**arguments)


def test_the_lists_cover_every_class_of_the_library():
    assert set(NOT_IMAGE_OPERATIONS) <= set(CLASSES), set(NOT_IMAGE_OPERATIONS) - set(CLASSES)
    assert set(CLASSES) == set(NOT_IMAGE_OPERATIONS) | FIRST | set(AFTER)
    assert len(TORCH_MODULES) >= 18


@pytest.mark.parametrize("name", AFTER)
def test_every_operation_declares_a_geometry(name):
    assert CLASSES[name].geometry is not Geometry.UNKNOWN, f"{name} declares no geometry"


@pytest.mark.parametrize("name", TORCH_MODULES)
def test_every_batch_augmentation_declares_a_geometry(name):
    cls = getattr(batch_ops, name)
    assert isinstance(cls.geometry, Geometry) and cls.geometry is not Geometry.UNKNOWN, name
    assert ss.compiler.TorchOperation(torch_module(name)).geometry is cls.geometry


def pixels_hwc(image: torch.Tensor) -> np.ndarray:
    """One sample as (height, width, channels) float64."""
    x = image.detach().to(torch.float64).cpu().numpy()
    return np.moveaxis(x, 0, -1) if x.shape[0] == 3 and x.shape[-1] != 3 else x


def rectangle_pixels(image: np.ndarray, box: np.ndarray) -> np.ndarray | None:
    """Where ``image`` shows the rectangle: the pixels nearer the colour at
    the box's centre than half its distance to the nearest other frequent
    colour (the background, a warp's fill); None when the centre shows the
    background (the rectangle erased or cut off: nothing to see)."""
    cx, cy = int((box[0] + box[2]) / 2), int((box[1] + box[3]) / 2)
    inside = image[min(max(cy, 0), image.shape[0] - 1), min(max(cx, 0), image.shape[1] - 1)]
    scale = max(1.0, float(np.abs(image).max()))
    flat = np.round(image.reshape(-1, image.shape[-1]) / scale, 2)
    values, counts = np.unique(flat, axis=0, return_counts=True)
    distances = [np.linalg.norm(colour - inside) for colour in values[np.argsort(counts)[::-1][:4]] * scale]
    if distances[0] < 0.1 * scale:  # the centre shows the background: the rectangle is covered or gone
        return None
    return np.linalg.norm(image - inside, axis=-1) < 0.5 * min(d for d in distances if d >= 0.1 * scale)


def assert_boxes_bound_the_rectangle(label: str, batch: dict) -> int:
    """Every kept box bounds the pixels of its rectangle; returns how many
    samples showed one to check."""
    checked = 0
    for k in range(int(batch["counts"].shape[0])):
        if int(batch["counts"][k]) == 0:
            continue
        box = batch["boxes"][k][0].numpy().astype(np.float64)
        image = pixels_hwc(batch["image"][k])
        shown = rectangle_pixels(image, box)
        if shown is None or not shown.any():
            continue
        rows, cols = np.flatnonzero(shown.any(1)), np.flatnonzero(shown.any(0))
        found = np.array([cols[0], rows[0], cols[-1] + 1, rows[-1] + 1], np.float64)
        yy, xx = np.mgrid[:shown.shape[0], :shown.shape[1]]
        within = (xx + 0.5 >= box[0] - 1.5) & (xx + 0.5 <= box[2] + 1.5) & (yy + 0.5 >= box[1] - 1.5) & \
                 (yy + 0.5 <= box[3] + 1.5)
        outside = shown & ~within
        assert outside.sum() <= 0.03 * shown.sum(), \
            f"{label}, sample {k}: {outside.sum()} of the rectangle's {shown.sum()} pixels lie outside its box " \
            f"{box.round(1).tolist()} (the pixels span {found.tolist()})"
        box_area = max(box[2] - box[0], 1.0) * max(box[3] - box[1], 1.0)
        assert shown.sum() >= 0.35 * box_area, \
            f"{label}, sample {k}: box {box.round(1).tolist()} holds {shown.sum()} of the rectangle's pixels " \
            f"(they span {found.tolist()}): it is not where the rectangle went"
        checked += 1
    return checked


OUTPUTS = ("image", "boxes", "labels", "counts")


def followed(image: list) -> dict:
    return {"image": image, "boxes": [BoundingBoxes(follow="image")], "labels": [KeptWithBoxes("boxes")],
            "counts": [Count("boxes")]}


def run_or_refused(path: str, label: str, image: list, entry: object, declared: Geometry) -> None:
    """Either the boxes follow ``entry`` (declared identity or mapped) and
    bound the rectangle in every batch, or the pipeline is refused naming
    it (declared untracked or unknown)."""
    try:
        loader = ss.Loader(path, 8, followed(image), order=ss.Order(seed=3), verbose=False)
    except ss.PipelineError as refused:
        message = str(refused)
        assert declared in (Geometry.UNTRACKED, Geometry.UNKNOWN), \
            f"{label} declares {declared} but was refused: {message}"
        assert "follows pipeline 'image'" in message and type(entry).__name__ in message, message
        return
    assert declared in (Geometry.IDENTITY, Geometry.MAPPED), f"{label} declares {declared} but boxes followed it"
    checked = sum(assert_boxes_bound_the_rectangle(label, dict(zip(OUTPUTS, batch))) for batch in loader)
    assert checked >= 4, f"{label}: only {checked} samples showed their rectangle"


@pytest.mark.parametrize("name", sorted(FIRST))
def test_boxes_follow_every_decoding_operation(rectangles, name):
    cls = CLASSES[name]
    entry = example(cls, size=(SIZE, SIZE))
    image = [ops.Resize(SIZE + 16), entry] if name == "RandomCrop" else [entry]
    run_or_refused(rectangles, name, image, entry, Geometry.MAPPED)


@pytest.mark.parametrize("name", AFTER)
def test_boxes_follow_every_operation_or_refuse_it(rectangles, name):
    cls = CLASSES[name]
    entry = example(cls)
    if cls.kind is ss.compiler.Kind.TORCH:
        image = [ops.Resize((SIZE, SIZE)), ops.Normalize(), entry]
    else:
        image = [ops.Resize((SIZE, SIZE)), entry]
    run_or_refused(rectangles, name, image, entry, cls.geometry)


@pytest.mark.parametrize("name", TORCH_MODULES)
def test_boxes_follow_every_batch_augmentation_or_refuse_it(rectangles, name):
    module = torch_module(name)
    run_or_refused(rectangles, name, [ops.Resize((SIZE, SIZE)), ops.Normalize(), module], module, module.geometry)


@pytest.mark.parametrize("name", ["ColorJitter", "RandomRotation", "RandomHorizontalFlip"])
def test_random_apply_is_followed_only_around_an_operation_that_moves_no_pixel(rectangles, name):
    """``RandomApply`` skips samples, leaving a map unwritten, so boxes
    follow it only around an operation that moves nothing."""
    entry = RandomApply(example(CLASSES[name]), p=0.5)
    run_or_refused(rectangles, f"RandomApply({name})", [ops.Resize((SIZE, SIZE)), entry], entry.op,
                   entry.geometry())


def test_an_operation_that_declares_nothing_is_refused_saying_what_to_declare(rectangles):
    class Shade(torch.nn.Module):
        def forward(self, x):
            return x * 0.5

    with pytest.raises(ss.PipelineError) as refused:
        ss.Loader(rectangles, 8, followed([ops.Resize((SIZE, SIZE)), ops.Normalize(), Shade()]), verbose=False)
    message = str(refused.value)
    assert "Shade" in message and "does not declare how it moves pixels" in message, message
    assert "Geometry.IDENTITY" in message and "DeclaresGeometry" in message, message

    class DeclaredShade(Shade, ss.compiler.DeclaresGeometry):
        geometry = Geometry.IDENTITY

    loader = ss.Loader(rectangles, 8, followed([ops.Resize((SIZE, SIZE)), ops.Normalize(), DeclaredShade()]),
                       order=ss.Order(seed=3), verbose=False)
    assert sum(assert_boxes_bound_the_rectangle("DeclaredShade", dict(zip(OUTPUTS, batch))) for batch in loader) >= 4


def test_a_batch_rotation_after_a_detection_preset_is_refused(rectangles):
    """The preset's boxes would otherwise stay where the rotation left its
    objects: the batch warp is named and its per-sample form suggested."""
    pipelines = ss.ops.presets.detection_train(SIZE)
    pipelines["image"].append(batch_ops.BatchRandomRotation(30))
    with pytest.raises(ss.PipelineError, match=r"BatchRandomRotation.* moves pixels with no single map .*per-sample"):
        ss.Loader(rectangles, 8, pipelines, verbose=False)
