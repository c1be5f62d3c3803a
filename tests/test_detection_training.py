"""Training smoke tests: a tiny segmenter and a tiny box regressor learn
from the loader's batches of generated shapes (their losses drop within
30 steps), which they could not if images and targets did not match."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_detection import FIELDS, ShapesWithMasks

import slipstream as ss
from slipstream.ops import (
    BoundingBoxes,
    Count,
    KeptWithBoxes,
    Normalize,
    RandomHorizontalFlip,
    RandomResizedCrop,
    presets,
)

STEPS = 30


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("training") / "shapes.slip")
    ss.write(path, ShapesWithMasks(64, seed=21),
             {**FIELDS, "masks": ss.InstanceMasksField(), "mask": ss.SegmentationMaskField()}, verbose=False)
    return path


def batches(loader: ss.Loader, steps: int):
    """``steps`` batches, over as many epochs as it takes."""
    epoch = 0
    while True:
        loader.set_epoch(epoch)
        for batch in loader:
            yield batch
            steps -= 1
            if not steps:
                return
        epoch += 1


def test_a_tiny_segmenter_learns_from_the_masks(dataset):
    torch.manual_seed(0)
    pipelines = {**presets.segmentation_train(64, dtype=np.float32), "boxes": None, "labels": None, "masks": None}
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(16, 7, 3, padding=1))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    with ss.Loader(dataset, 16, pipelines, order=ss.Order("random", seed=1), verbose=False) as loader:
        for image, mask in batches(loader, STEPS):
            loss = torch.nn.functional.cross_entropy(model(image), mask.long(), ignore_index=255)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5]), losses


def test_a_tiny_box_regressor_learns_from_the_boxes(dataset):
    """Each output pixel predicts whether it lies in a kept box: the target
    is drawn from the boxes the loader gives, so it is learnable only if
    they sit on the shapes of the image."""
    torch.manual_seed(0)
    size = 64
    pipelines = {"image": [RandomResizedCrop(size, scale=(0.3, 1.0)), RandomHorizontalFlip(),
                           Normalize(dtype=np.float32)],
                 "boxes": [BoundingBoxes(follow="image")], "labels": [KeptWithBoxes("boxes")],
                 "counts": [Count("boxes")], "masks": None, "mask": None}
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(16, 1, 3, padding=1))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    grid = torch.arange(size) + 0.5
    losses = []
    with ss.Loader(dataset, 16, pipelines, order=ss.Order("random", seed=2), verbose=False) as loader:
        for image, boxes, labels, counts in batches(loader, STEPS):
            target = torch.zeros(len(image), size, size)
            for i, sample in enumerate(ss.ops.unpad(boxes, counts)):
                for x1, y1, x2, y2 in sample.tolist():
                    target[i] += ((grid[:, None] > y1) & (grid[:, None] < y2) & (grid > x1) & (grid < x2)).float()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(image)[:, 0], target.clamp(max=1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:5]), losses
