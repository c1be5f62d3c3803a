"""Which sample MixUp and CutMix pair each sample with, as each recipe's
authors do: timm's ``Mixup`` mixes a batch with its flip (sample ``i`` of
``n`` with ``n - 1 - i``), torchvision's with its neighbour; and the recipes
that mix labels ask for the number of classes."""

from __future__ import annotations

import numpy as np
import pytest

from slipstream.compiler import ArraySource, Pipeline
from slipstream.errors import ArgumentError
from slipstream.ops import CutMix, MixLabels, MixUp, MixUpOrCutMix, presets

BATCH = 24
# Sample k is one flat grey, 10 * k + 5, and its own class: a mixed pixel and a soft label both name the partner.
IMAGES = np.broadcast_to(np.arange(BATCH, dtype=np.uint8)[:, None, None, None] * 10 + 5, (BATCH, 12, 16, 1)).copy()
LABELS = np.arange(BATCH, dtype=np.int64)


@pytest.fixture(scope="module")
def mixed():
    """One compiled stage: the same batch through timm's pairing (MixUp, CutMix, either per batch) and
    torchvision's (MixUp), each with its soft labels."""
    mixings = {"mixup": MixUp(0.8, pairing="flip"), "cutmix": CutMix(1.0, pairing="flip"),
               "either": MixUpOrCutMix(0.8, 1.0, switch_prob=0.5, pairing="flip"), "roll": MixUp(0.8)}
    pipelines = {}
    for name, mix in mixings.items():
        pipelines[name] = [ArraySource(IMAGES), mix]
        pipelines[f"{name}_labels"] = [ArraySource(LABELS), MixLabels(mix, BATCH)]
    compiled = Pipeline(pipelines).compile(BATCH, seed=5)

    def run(indices, epoch=0):
        out = compiled(np.asarray(indices), epoch=epoch)
        return {name: value.copy() for name, value in out.items()}

    return run


def partners(soft: np.ndarray, labels: np.ndarray) -> list[int]:
    """The class each soft label mixes in besides its own (its own when unmixed: a CutMix box may be empty)."""
    found = []
    for row, own in zip(soft, labels):
        others = [k for k in np.flatnonzero(row > 0) if k != own]
        assert len(others) <= 1 and abs(row.sum() - 1) < 1e-6
        found.append(int(others[0]) if others else int(own))
    return found


def check_pairs(images: np.ndarray, soft: np.ndarray, indices: np.ndarray, expected: list[int]) -> str:
    """Each sample mixed with the sample at position ``expected[i]`` of the batch, in its pixels and its soft
    label; which mixing the batch met, ``"mixup"`` or ``"cutmix"``."""
    blends, cuts = [], []
    for i, (own_index, partner) in enumerate(zip(indices, expected)):
        own, other = float(IMAGES[own_index, 0, 0, 0]), float(IMAGES[indices[partner], 0, 0, 0])
        pixels, lam = images[i].astype(float), soft[i, own_index]
        assert partners(soft[i:i + 1], indices[i:i + 1])[0] in (own_index, indices[partner])
        blends.append(np.abs(pixels - (lam * own + (1 - lam) * other)).max() <= 0.5 + 1e-3)
        # CutMix: the pixels are the two samples', the partner's share 1 - lambda
        cuts.append(np.isin(pixels, (own, other)).all() and abs((pixels == other).mean() - (1 - lam)) < 1e-6)
    if all(blends):
        return "mixup"
    assert all(cuts)
    return "cutmix"


@pytest.mark.parametrize("name", ["mixup", "cutmix", "either"])
def test_flip_pairs_sample_i_with_n_minus_1_minus_i_in_pixels_and_labels(mixed, name):
    met = set()
    for epoch in range(4):  # MixUpOrCutMix draws MixUp or CutMix per batch: both are met
        out = mixed(LABELS, epoch)
        met.add(check_pairs(out[name], out[f"{name}_labels"], LABELS, [BATCH - 1 - i for i in range(BATCH)]))
        mixed_rows = sum(p != i for i, p in enumerate(partners(out[f"{name}_labels"], LABELS)))
        assert mixed_rows >= BATCH - 4  # only an empty CutMix box leaves a label as it was
    assert met == {"mixup": {"mixup"}, "cutmix": {"cutmix"}, "either": {"mixup", "cutmix"}}[name]


def test_roll_keeps_pairing_each_sample_with_the_next(mixed):
    out = mixed(LABELS)
    assert partners(out["roll_labels"], LABELS) == [(i + 1) % BATCH for i in range(BATCH)]
    assert check_pairs(out["roll"], out["roll_labels"], LABELS, [(i + 1) % BATCH for i in range(BATCH)]) == "mixup"


def test_a_shorter_batch_is_flipped_within_itself(mixed):
    """The last batch of an epoch (7 samples): pairs within it, its middle sample left as it was."""
    indices = LABELS[3:10]
    out = mixed(indices)
    assert partners(out["mixup_labels"][:7], indices) == indices[::-1].tolist()
    assert out["mixup_labels"][3, indices[3]] == 1.0 and (out["mixup"][3] == IMAGES[indices[3]]).all()


def test_repeated_copies_are_mixed_with_other_pictures_under_timms_pairing(mixed):
    """Repeated augmentation hands out a sample's copies next to each other
    (3 here, DeiT's): pairing with the neighbour leaves two labels in three
    unmixed, timm's flip none."""
    copies = np.repeat(np.arange(BATCH // 3), 3)
    out = mixed(copies)

    def unmixed(name: str) -> int:
        return sum(partner == own for partner, own in zip(partners(out[name], copies), copies))

    assert unmixed("roll_labels") == 2 * BATCH // 3
    assert unmixed("mixup_labels") == 0


@pytest.mark.parametrize(("pipelines", "kind", "pairing"), [
    (lambda: presets.deit_train(num_classes=10), MixUpOrCutMix, "flip"),
    (lambda: presets.timm_train(mixup=0.8, cutmix=1.0, num_classes=10), MixUpOrCutMix, "flip"),
    (lambda: presets.timm_train(mixup=0.8, num_classes=10), MixUp, "flip"),
    (lambda: presets.timm_train(cutmix=1.0, num_classes=10), CutMix, "flip"),
    (lambda: presets.torchvision_train(num_classes=10), MixUpOrCutMix, "roll"),
    (lambda: presets.torchvision_train(cutmix_alpha=0.0, num_classes=10), MixUp, "roll"),
    (lambda: presets.torchvision_vit_train(num_classes=10), MixUpOrCutMix, "roll"),
])
def test_each_recipe_pairs_as_its_authors_do(pipelines, kind, pairing):
    made = pipelines()
    mix = made["image"][-1]
    assert type(mix) is kind and mix.pairing == pairing
    assert made["label"][0].mix is mix


@pytest.mark.parametrize(("call", "name"), [
    (presets.deit_train, "deit_train"),
    (presets.torchvision_train, "torchvision_train"),
    (presets.torchvision_vit_train, "torchvision_train"),
    (lambda: presets.timm_train(mixup=0.8), "timm_train"),
])
def test_a_recipe_that_mixes_labels_asks_for_the_number_of_classes(call, name):
    with pytest.raises(ArgumentError, match=f"{name} mixes labels .*give num_classes"):
        call()


def test_the_pairing_is_part_of_the_compiled_structure_and_shown_when_not_the_default():
    assert MixUp(pairing="flip").fingerprint() != MixUp().fingerprint()
    assert repr(MixUp()) == "MixUp(alpha=0.2)" and repr(CutMix(pairing="flip")) == "CutMix(alpha=1.0, pairing='flip')"
    with pytest.raises(ArgumentError, match="MixUp: pairing must be 'roll' or 'flip', got 'reverse'"):
        MixUp(pairing="reverse")
