"""Ready-made loader pipelines for the common recipes.  Each returns the
``pipelines`` argument of :class:`slipstream.Loader`; combine it with your
own entries (``{**imagenet_train(), "caption": None}``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from slipstream.errors import ArgumentError
from slipstream.compiler.graph import View
from slipstream.compiler.handles import OutputRef, output_name
from slipstream.ops.augment import ColorJitter, RandomErasing, RandomHorizontalFlip
from slipstream.ops.crops import CenterCrop, RandomResizedCrop
from slipstream.ops.mixing import CutMix, MixLabels, MixUp, MixUpOrCutMix
from slipstream.ops.multicrop import multi_crop_pipelines
from slipstream.ops.pack import Normalize

# The operations of the other recipes (policies, detection, decoding on a
# device) are imported by the presets that use them: see slipstream.ops.

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def imagenet_train(size: int = 224, field: str = "image", dtype: Any = np.float16, mean: Any = IMAGENET_MEAN,
                   std: Any = IMAGENET_STD, decode_device: Any = None) -> dict[str, list[Any]]:
    """RandomResizedCrop(size), RandomHorizontalFlip(), normalize to
    (3, size, size) ``dtype``: one decode and one pack per sample.  With
    ``decode_device`` (e.g. ``"cuda"``) the JPEGs are decoded, cropped and
    normalized on that device (:class:`~slipstream.ops.DecodeOnDevice`)."""
    return {field: [*_on_device(decode_device), RandomResizedCrop(size), RandomHorizontalFlip(),
                    Normalize(mean, std, dtype)]}


def imagenet_val(size: int = 224, ratio: float = 224 / 256, field: str = "image", dtype: Any = np.float16,
                 mean: Any = IMAGENET_MEAN, std: Any = IMAGENET_STD, decode_device: Any = None) -> dict[str, list[Any]]:
    """The central crop of ``ratio`` of the shorter side, at ``size``,
    normalized; on ``decode_device`` as in :func:`imagenet_train`."""
    return {field: [*_on_device(decode_device), CenterCrop(size, ratio=ratio), Normalize(mean, std, dtype)]}


def _on_device(device: Any) -> list[Any]:
    if device is None:
        return []
    from slipstream.ops.device_decode import DecodeOnDevice

    return [DecodeOnDevice(device)]


def simclr(size: int = 224, field: str = "image", second: str = "view_2", dtype: Any = np.float16,
           mean: Any = IMAGENET_MEAN, std: Any = IMAGENET_STD) -> dict[str, Any]:
    """Two independently augmented views of each image, as outputs ``field``
    and ``second`` (a :class:`~slipstream.View` of ``field``):
    RandomResizedCrop(size) and a flip each, normalized."""
    view = [RandomResizedCrop(size), RandomHorizontalFlip(), Normalize(mean, std, dtype)]
    return {field: list(view), second: View(field, list(view))}


def detection_train(size: int = 300, image: OutputRef = "image", boxes: OutputRef = "boxes",
                    labels: OutputRef = "labels", counts: OutputRef = "counts", masks: OutputRef | None = None,
                    per_box: tuple[OutputRef, ...] = (),
                    dtype: Any = np.float16, mean: Any = IMAGENET_MEAN, std: Any = IMAGENET_STD) -> dict[str, Any]:
    """SSD's training augmentation: a random crop with a minimum IoU against
    the boxes (:class:`~slipstream.ops.detection.RandomIoUCrop`), a
    horizontal flip, resized to ``size`` x ``size`` and normalized to
    (3, size, size) ``dtype``; the boxes follow (XYXY, the boxes whose
    centre the crop left out dropped together with their labels), padded to
    the dataset's most boxes per image, with their number in ``counts``.
    With ``masks``, that field's instance masks follow too, and so do the
    rows of the fields ``per_box`` names (crowd flags, areas).  Each
    output is named by a str or given as a :class:`slipstream.Output`
    handle, which then keys the mapping and is what the others follow;
    each reads the field of its name."""
    from slipstream.ops.detection import BoundingBoxes, Count, InstanceMasks, KeptWithBoxes, RandomIoUCrop

    pipelines: dict[str, Any] = {
        image: [RandomIoUCrop(size, boxes=output_name(boxes)), RandomHorizontalFlip(), Normalize(mean, std, dtype)],
        boxes: [BoundingBoxes(follow=image, center_inside=True)],
        labels: [KeptWithBoxes(boxes)],
        counts: [Count(boxes)],
    }
    if masks is not None:
        pipelines[masks] = [InstanceMasks(follow=image, boxes=boxes)]
    for field in per_box:
        pipelines[field] = [KeptWithBoxes(boxes)]
    return pipelines


def segmentation_train(size: int = 512, scale: tuple[float, float] = (0.25, 1.0), image: OutputRef = "image",
                       mask: OutputRef = "mask", fill: int | None = None, dtype: Any = np.float16, mean: Any = IMAGENET_MEAN,
                       std: Any = IMAGENET_STD) -> dict[str, list[Any]]:
    """A random crop of ``scale`` of the image's area (aspect ratio 3/4 to
    4/3) resized to ``size``, a horizontal flip, normalized; the mask
    follows on the same pixels (nearest neighbour, ``fill`` outside the
    image: see :class:`~slipstream.ops.detection.SegmentationMask`)."""
    from slipstream.ops.detection import SegmentationMask

    return {image: [RandomResizedCrop(size, scale=scale), RandomHorizontalFlip(), Normalize(mean, std, dtype)],
            mask: [SegmentationMask(follow=image, fill=fill)]}


def torchvision_train(crop_size: int = 176, auto_augment: str | None = "ta_wide", random_erase: float = 0.1,
                      mixup_alpha: float = 0.2, cutmix_alpha: float = 1.0, num_classes: int | None = None,
                      hflip: float = 0.5, ra_magnitude: int = 9, augmix_severity: int = 3,
                      interpolation: str = "bilinear",
                      image: str = "image", label: str = "label", mean: Any = IMAGENET_MEAN,
                      std: Any = IMAGENET_STD) -> dict[str, list[Any]]:
    """torchvision's reference classification recipe, with the defaults of
    its ResNet-50 "v2" weights (``IMAGENET1K_V2``; torchvision's
    ``references/classification``: ``presets.ClassificationPresetTrain`` and
    ``train.py``'s batch mixing): RandomResizedCrop(176), a horizontal flip,
    TrivialAugmentWide (bilinear), normalized to (3, 176, 176) float32,
    RandomErasing(0.1), then each batch mixed by MixUp(0.2) or CutMix(1.0)
    with soft labels, each sample with its neighbour (``pairing="roll"``:
    torchvision mixes a batch with ``batch.roll(1, 0)``).  The recipe's
    repeated augmentation is the loader's order,
    ``ss.Order("random", repeats=4)``; evaluate with :func:`torchvision_val`.

    Args:
        crop_size: the training crop's side.
        auto_augment: ``"ta_wide"`` (TrivialAugmentWide), ``"ra"``
            (RandAugment at ``ra_magnitude``), ``"augmix"`` (AugMix at
            ``augmix_severity``), ``"imagenet"``, ``"cifar10"`` or
            ``"svhn"`` (AutoAugment's policies), or None.
        random_erase: RandomErasing's probability (0: none).
        mixup_alpha, cutmix_alpha: the mixing's Beta parameters (0: that
            one is not used; both 0: no mixing, integer labels).
        num_classes: the soft labels' length; needed when mixing.
        hflip: the flip's probability (0: none).
        ra_magnitude: RandAugment's magnitude bin.
        augmix_severity: AugMix's severity.
        interpolation: the policies' interpolation, ``"bilinear"`` (the
            recipe's) or ``"nearest"``.
        image, label: the fields.
        mean, std: Normalize's.
    """
    steps: list[Any] = [RandomResizedCrop(crop_size)]
    if hflip > 0:
        steps.append(RandomHorizontalFlip(hflip))
    if auto_augment is not None:
        steps.append(_policy(auto_augment, ra_magnitude, augmix_severity, interpolation))
    steps.append(Normalize(mean, std, np.float32))  # mixing blends float32 samples
    if random_erase > 0:
        steps.append(RandomErasing(p=random_erase))
    return _with_mixing({image: steps}, image, label, _mixing(mixup_alpha, cutmix_alpha, pairing="roll"),
                        num_classes, "torchvision_train")


def torchvision_val(crop_size: int = 224, resize_size: int = 232, image: str = "image", mean: Any = IMAGENET_MEAN,
                    std: Any = IMAGENET_STD) -> dict[str, list[Any]]:
    """torchvision's reference evaluation (``ClassificationPresetEval``):
    the shorter side resized to ``resize_size`` (232 for the ResNet-50 "v2"
    weights, 256 for the first ones and the ViTs), the central
    ``crop_size`` crop, normalized to float32; one decode of just the crop."""
    return {image: [CenterCrop(crop_size, ratio=crop_size / resize_size), Normalize(mean, std, np.float32)]}


def torchvision_vit_train(crop_size: int = 224, num_classes: int | None = None, image: str = "image",
                          label: str = "label") -> dict[str, list[Any]]:
    """torchvision's recipe for its ViT weights (``vit_b_16``, torchvision's
    ``references/classification/README.md``): RandAugment instead of
    TrivialAugmentWide, no RandomErasing, MixUp(0.2) or CutMix(1.0), at 224;
    evaluate with ``torchvision_val(224, 256)``."""
    return torchvision_train(crop_size, auto_augment="ra", random_erase=0.0, num_classes=num_classes, image=image,
                             label=label)


def timm_train(auto_augment: str | None = "rand-m9-mstd0.5-inc1", size: int = 224,
               scale: tuple[float, float] = (0.08, 1.0), ratio: tuple[float, float] = (3 / 4, 4 / 3),
               hflip: float = 0.5, color_jitter: float | None = 0.4, interpolation: str = "bicubic",
               re_prob: float = 0.0, re_mode: str = "pixel", mixup: float = 0.0, cutmix: float = 0.0,
               switch_prob: float = 0.5, num_classes: int | None = None, image: str = "image", label: str = "label",
               mean: Any = IMAGENET_MEAN, std: Any = IMAGENET_STD) -> dict[str, list[Any]]:
    """timm's training transform (``timm.data.create_transform(...,
    is_training=True)``, i.e. ``transforms_factory.transforms_imagenet_train``)
    and its batch mixing (``timm.data.Mixup``), with timm's argument names:
    RandomResizedCrop(size, scale, ratio) at ``interpolation``, a horizontal
    flip, the RandAugment of ``auto_augment`` (:class:`TimmRandAugment`;
    without one, ``ColorJitter(color_jitter)`` on brightness, contrast and
    saturation, which timm turns off under RandAugment), normalized to float32,
    RandomErasing(``re_prob``) over timm's area (0.02 to 1/3) and aspect
    ratios (0.3 to 1/0.3), then each batch mixed by MixUp(``mixup``) or, with
    probability ``switch_prob``, CutMix(``cutmix``), with soft labels.  Sample
    ``i`` of ``n`` is mixed with sample ``n - 1 - i`` (``pairing="flip"``), as
    timm's ``Mixup`` mixes a batch with ``x.flip(0)`` (``timm/data/mixup.py``):
    under repeated augmentation, whose copies of a sample stand next to each
    other, nearly every copy is mixed with another picture.

    timm's label smoothing is the loss's here: ``torch.nn.CrossEntropyLoss(
    label_smoothing=0.1)`` on the soft labels gives timm's smoothed, mixed
    targets exactly.

    Args:
        auto_augment: a timm RandAugment string (``"rand-m9-mstd0.5-inc1"``;
            see :func:`~slipstream.ops.timm_augment.parse_rand_augment`), or
            None.
        size, scale, ratio: the crop's.
        hflip: the flip's probability (0: none).
        color_jitter: brightness, contrast and saturation jitter without
            ``auto_augment`` (None or 0: none).
        interpolation: the crop's resize, ``"bicubic"`` (DeiT's
            ``--train-interpolation``), ``"bilinear"`` or ``"area"``; timm's
            ``"random"`` (a choice per image) is not offered.  The policy's
            geometric steps are bilinear.
        re_prob: RandomErasing's probability (0: none).
        re_mode: ``"pixel"`` (a normal draw per pixel and channel) or
            ``"const"`` (zero after normalization); timm's ``"rand"`` is not
            offered.
        mixup, cutmix: the mixings' Beta parameters (0: that one is not used).
        switch_prob: the probability of CutMix for a batch when both are used.
        num_classes: the soft labels' length; needed when mixing.
        image, label: the fields.
        mean, std: Normalize's (and the policy's fill, timm's ``img_mean``).
    """
    if re_mode not in ("pixel", "const"):
        raise ArgumentError(f"timm_train: re_mode must be 'pixel' or 'const' (timm's 'rand', one draw per channel, "
                            f"is not offered), got {re_mode!r}")
    if auto_augment is not None and not str(auto_augment).startswith("rand"):
        raise ArgumentError(f"timm_train: auto_augment must be a timm RandAugment string such as "
                            f"'rand-m9-mstd0.5-inc1', or None (timm's AugMix and AutoAugment strings are not "
                            f"offered; for those see torchvision_train), got {auto_augment!r}")
    steps: list[Any] = [RandomResizedCrop(size, scale=scale, ratio=ratio, interpolation=interpolation)]
    if hflip > 0:
        steps.append(RandomHorizontalFlip(hflip))
    if auto_augment is not None:
        from slipstream.ops.timm_augment import TimmRandAugment

        fill = tuple(min(255, round(255 * m)) for m in np.broadcast_to(mean, 3))
        steps.append(TimmRandAugment(auto_augment, interpolation="bilinear", fill=fill))
    elif color_jitter:
        steps.append(ColorJitter(color_jitter, color_jitter, color_jitter))
    steps.append(Normalize(mean, std, np.float32))
    if re_prob > 0:
        steps.append(RandomErasing(p=re_prob, scale=(0.02, 1 / 3), ratio=(0.3, 1 / 0.3),
                                   value="random" if re_mode == "pixel" else None))
    return _with_mixing({image: steps}, image, label, _mixing(mixup, cutmix, switch_prob, pairing="flip"),
                        num_classes, "timm_train")


def deit_train(num_classes: int | None = None, size: int = 224, image: str = "image",
               label: str = "label") -> dict[str, list[Any]]:
    """DeiT's training recipe (facebookresearch/deit, ``main.py``'s defaults,
    which build timm's transform and Mixup): :func:`timm_train` with
    ``"rand-m9-mstd0.5-inc1"``, bicubic crops, RandomErasing(0.25, pixel),
    MixUp(0.8) or CutMix(1.0) with switch probability 0.5, sample ``i`` of a
    batch of ``n`` mixed with sample ``n - 1 - i`` as timm's ``Mixup`` does.
    ``num_classes``, the soft labels' length, must be given (DeiT's
    ``--nb-classes`` defaults to ImageNet's 1000; no default here, so that
    another dataset's labels are not silently 1000 long).  The rest of the
    recipe is the loader's and the loss's: repeated augmentation with 3
    repeats (``ss.Order("random", repeats=3)``, DeiT's ``RASampler``) and
    label smoothing 0.1 (``torch.nn.CrossEntropyLoss(label_smoothing=0.1)``);
    evaluate with ``torchvision_val(size, int(size / 0.875))`` (DeiT's
    crop ratio 0.875, bicubic in DeiT).

    Raises:
        ArgumentError: ``num_classes`` not given.
    """
    if num_classes is None:
        raise ArgumentError("deit_train mixes labels (MixUp or CutMix): give num_classes, the soft labels' length "
                            "(1000 for ImageNet)")
    return timm_train("rand-m9-mstd0.5-inc1", size, interpolation="bicubic", re_prob=0.25, re_mode="pixel",
                      mixup=0.8, cutmix=1.0, switch_prob=0.5, num_classes=num_classes, image=image, label=label)


def _with_mixing(pipelines: dict[str, list[Any]], image: str, label: str, mix: Any, num_classes: int | None,
                 preset: str) -> dict[str, list[Any]]:
    """``pipelines`` with ``mix`` at the end of the image's and the labels mixed to match."""
    if mix is None:
        return pipelines
    if num_classes is None:
        raise ArgumentError(f"{preset} mixes labels (MixUp or CutMix on): give num_classes, or turn the mixing off")
    pipelines[image].append(mix)
    pipelines[label] = [MixLabels(mix, num_classes)]
    return pipelines


def _policy(name: str, ra_magnitude: int, augmix_severity: int, interpolation: str) -> Any:
    """The policy torchvision's ``--auto-augment`` names."""
    from slipstream.ops.augmix import AugMix
    from slipstream.ops.policies import AUTO_AUGMENT_POLICIES, AutoAugment, RandAugment, TrivialAugmentWide

    if name == "ta_wide":
        return TrivialAugmentWide(interpolation=interpolation)
    if name == "ra":
        return RandAugment(magnitude=ra_magnitude, interpolation=interpolation)
    if name == "augmix":
        return AugMix(severity=augmix_severity, interpolation=interpolation)
    if name in AUTO_AUGMENT_POLICIES:
        return AutoAugment(name, interpolation=interpolation)
    raise ArgumentError(f"auto_augment must be 'ta_wide', 'ra', 'augmix', one of {sorted(AUTO_AUGMENT_POLICIES)} or None, "
                        f"got {name!r}")


def _mixing(mixup_alpha: float, cutmix_alpha: float, switch_prob: float = 0.5, *, pairing: str) -> Any:
    """torchvision's ``RandomChoice`` (timm's ``switch_prob``) of the mixings whose alpha is above 0, pairing
    the samples by ``pairing`` (each recipe's own: torchvision's ``"roll"``, timm's ``"flip"``)."""
    if mixup_alpha > 0 and cutmix_alpha > 0:
        return MixUpOrCutMix(mixup_alpha, cutmix_alpha, switch_prob=switch_prob, pairing=pairing)
    if mixup_alpha > 0:
        return MixUp(mixup_alpha, pairing=pairing)
    if cutmix_alpha > 0:
        return CutMix(cutmix_alpha, pairing=pairing)
    return None


multi_crop = multi_crop_pipelines
