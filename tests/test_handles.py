"""Outputs referred to by handle: an entry that follows, counts or reads
another output holds that output's :class:`slipstream.Output` handle, the
graph resolves it by identity, and a mapping written with names lowers to
the same graph and the same batches."""

from __future__ import annotations

import numpy as np
import pytest

import slipstream as ss
from slipstream.compiler import ArraySource, Pipeline, RefNode
from slipstream.ops import presets
from slipstream.ops.detection import BoundingBoxes, Count, KeptWithBoxes, TrimToCounts
from test_geometry_declared import rectangles  # noqa: F401  (the dataset fixture: one rectangle per image)


def batches(path: str, pipelines: dict) -> list[dict[str, bytes]]:
    with ss.Loader(path, 4, pipelines, order=ss.Order("random", seed=7), as_dict=True, verbose=False) as loader:
        return [{name: np.ascontiguousarray(value.numpy()).tobytes() for name, value in batch.items()}
                for batch in loader]


def test_a_detection_preset_keyed_by_handles_gives_the_batches_of_its_names(rectangles):
    image, boxes, labels, counts = (ss.Output(name) for name in ("image", "boxes", "labels", "counts"))
    by_handle = presets.detection_train(48, image=image, boxes=boxes, labels=labels, counts=counts)
    assert set(by_handle) == {image, boxes, labels, counts}
    assert by_handle[boxes][0].follow is image and by_handle[labels][0].boxes is boxes
    by_name = presets.detection_train(48)
    named, handled = batches(rectangles, by_name), batches(rectangles, by_handle)
    assert named == handled and len(named) == 4  # 16 images, batches of 4
    assert set(handled[0]) == {"image", "boxes", "labels", "counts"}


def test_handles_written_by_hand_follow_by_identity(rectangles):
    image, boxes = ss.Output("image"), ss.Output("boxes")
    pipelines = {image: [ss.ops.Resize((32, 32))], boxes: [BoundingBoxes(follow=image)],
                 "labels": [KeptWithBoxes(boxes)], "counts": [Count(boxes)]}
    by_name = {"image": [ss.ops.Resize((32, 32))], "boxes": [BoundingBoxes(follow="image")],
               "labels": [KeptWithBoxes("boxes")], "counts": [Count("boxes")]}
    assert batches(rectangles, pipelines) == batches(rectangles, by_name)


def test_a_handle_that_keys_no_output_is_refused_naming_it(rectangles):
    """Another handle of the same name is another output: a reference is
    resolved by the object, never by comparing its text."""
    image = ss.Output("image")
    pipelines = {image: [ss.ops.Resize((32, 32))], "boxes": [BoundingBoxes(follow=ss.Output("image"))],
                 "labels": None}
    with pytest.raises(ss.PipelineError, match=r"refers to Output\('image'\), a handle that keys no output"):
        ss.Loader(rectangles, 4, pipelines, verbose=False)


def test_two_outputs_of_one_name_are_refused(rectangles):
    with pytest.raises(ss.PipelineError, match=r"two outputs of the pipelines mapping are named 'image'"):
        ss.Loader(rectangles, 4, {ss.Output("image"): [], "image": []}, verbose=False)
    with pytest.raises(ss.PipelineError, match=r"keyed by output names \(str\) or slipstream.Output handles"):
        Pipeline({3: [ArraySource(np.zeros((2, 2, 2, 3), np.uint8))]})


def test_references_of_the_compiler_resolve_handles(rectangles):
    """RefNode, TrimToCounts and multi-crop's views read through handles."""
    images = np.arange(6 * 4 * 4 * 3, dtype=np.uint8).reshape(6, 4, 4, 3)
    source = ss.Output("source")
    out = Pipeline({source: [ArraySource(images)], "copy": [RefNode(source)]}).compile(6)(np.arange(6))
    np.testing.assert_array_equal(out["copy"], out["source"])

    counts = ss.Output("counts")
    pipelines = {"image": [ss.ops.Resize((32, 32))], "boxes": [BoundingBoxes(follow="image"), TrimToCounts(counts)],
                 counts: [Count("boxes")], "labels": None}
    for batch in batches(rectangles, pipelines):
        assert len(batch["boxes"]) == 4 * 4 * 4  # trimmed to the most boxes of the batch: one each

    crops = ss.ops.multi_crop_pipelines(global_crops=1, global_size=24, local_crops=1, local_size=12)
    handle = next(key for key in crops if isinstance(key, ss.Output))
    assert handle.name == "crops" and crops["global_0"][0].source_pipeline is handle
    got = batches(rectangles, {**crops, "boxes": None, "labels": None})
    assert {"global_0", "local_0"} <= set(got[0]) and "crops" not in got[0]


def test_an_output_renamed_through_its_handle_keeps_its_draws(rectangles):
    """A handle names its output; which name it carries changes no draw."""
    def pipelines(name: str) -> dict:
        image = ss.Output("image")
        view = ss.Output(name)
        return {image: [ss.ops.RandomResizedCrop(32)],
                view: ss.View("image", [ss.ops.RandomResizedCrop(24), ss.ops.RandomHorizontalFlip()]),
                "boxes": None, "labels": None}

    first, second = batches(rectangles, pipelines("view")), batches(rectangles, pipelines("renamed"))
    assert [b["view"] for b in first] == [b["renamed"] for b in second]
    assert [b["image"] for b in first] == [b["image"] for b in second]
