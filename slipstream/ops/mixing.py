"""MixUp and CutMix: batch operations that mix each image with a partner in
the batch, and the label node that mixes the labels the same way.

Each sample ``i`` of a batch of ``n`` draws its own lambda from
Beta(alpha, alpha) (from its random key: the same for any thread count or
resume).  Its partner follows ``pairing``: with ``"roll"`` (the default) the
next sample, ``(i + 1) % n``, a batch paired with itself rolled by one as
torchvision's ``MixUp`` and ``CutMix`` pair it (theirs, ``batch.roll(1, 0)``,
takes the previous sample: the same neighbours); with ``"flip"`` sample
``n - 1 - i``, the batch reversed, as timm's ``Mixup`` pairs it
(``timm/data/mixup.py`` mixes a batch with ``x.flip(0)`` and its labels with
``target.flip(0)``).  Repeated augmentation puts a sample's copies next to
each other, so ``"roll"`` mixes most copies with a copy of the same picture
(an unmixed label) where ``"flip"`` mixes them with other pictures.  The
image operation records, per sample, the partner's position and the lambda
actually used (CutMix: the fraction of the image that stays the sample's
own); the label pipeline reads them through a :class:`MixLabels` node::

    mix = MixUp(alpha=0.2)
    pipelines = {"image": [RandomResizedCrop(224), mix, Normalize(mean, std)],
                 "label": [MixLabels(mix, num_classes=1000)]}   # reads mix's parameters, where it stands

The soft labels are ``lambda * onehot(label) + (1 - lambda) * onehot(partner's label)``.
Mixing works on uint8 (height, width, channels) images (mixed in float,
rounded) and on float samples: MixUp blends float32 samples of any shape,
CutMix cuts the (channels, height, width) float32 or float16 samples of
``Normalize``.  Each sample's values are computed by a C kernel
(``slip_mix_blend``, ``slip_mix_paste``); the draws stay in compiled code.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from slipstream.compiler import Allocation, Geometry, Kind, Node, Operation, State
from slipstream.compiler import astgen as A
from slipstream.compiler import random as rnd
from slipstream.compiler.handles import OutputRef
from slipstream.compiler.nodes import EmitContext, Finder, Input
from slipstream.compiler.params import PROBABILITY, Choice, Float, Int, param
from slipstream.errors import PipelineError
from slipstream.native import Dtype, slip_mix_blend, slip_mix_paste
from slipstream.ops.warps import image_bytes

ALPHA = Float(0.0, low_open=True)
_ALPHA_DOC = "the Beta(alpha, alpha) parameter each sample's lambda is drawn from"
PAIRINGS = ("roll", "flip")
"""How a batch operation pairs sample ``i`` of ``n``: ``"roll"``, with ``(i + 1) % n``
(torchvision's neighbour); ``"flip"``, with ``n - 1 - i`` (timm's ``x.flip(0)``)."""
PAIRING = Choice(PAIRINGS)
_PAIRING_DOC = ("each sample's partner: 'roll', the next one, (i + 1) % n (torchvision's neighbour); 'flip', "
                "sample n - 1 - i (timm's batch.flip(0))")
PARAMS = 2  # per sample: partner position, lambda
MIXING = "params"
"""The named output of MixUp's and CutMix's per-sample parameters, which MixLabels reads."""


def _check_mixable(op: Operation, state: State, dtypes: tuple[Any, ...] = (np.float32,)) -> None:
    """Refuse what ``op`` cannot mix: it takes (height, width, channels)
    uint8 images and float samples of ``dtypes`` (blending needs float32;
    compiled code holds float16 values as their bits, which only a copy keeps)."""
    if state.dtype == np.uint8 and len(state.shape) == 3:
        return
    if state.dtype in dtypes:
        return
    names = " or ".join(np.dtype(d).name for d in dtypes)
    raise ValueError(f"{type(op).__name__} mixes (height, width, channels) uint8 images or {names} samples, got "
                     f"{state.shape} {state.dtype}")


_BLEND_REFUSED = ("MixUp blends C-contiguous uint8 or float32 samples (slipstream.native.last_error() says what was "
                  "wrong)")
_PASTE_REFUSED = ("CutMix pastes boxes inside C-contiguous samples of 1 to 65500 pixels a side "
                  "(slipstream.native.last_error() says what was wrong)")


class _Mixing(Operation):
    """A batch operation mixing each sample with its partner; its output
    ``params`` holds each sample's partner position and lambda.  The
    partner's pixels follow no map of the sample's own, so boxes, keypoints
    and masks cannot follow it (torchvision's ``MixUp`` and ``CutMix`` refuse
    them too)."""

    geometry: ClassVar[Geometry] = Geometry.UNTRACKED

    kind: ClassVar[Kind] = Kind.BATCH

    def declare(self, state: State):
        self._check(state)
        return state, [Allocation(state.shape, state.dtype), Allocation((PARAMS,), np.float64, name=MIXING)]

    def _check(self, state: State) -> None:
        _check_mixable(self, state)

    def __repr__(self) -> str:
        # The default pairing is left out, so that torchvision's pairing reads as torchvision's call does;
        # the compile key reads the fields, not this text.
        shown = [f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self)
                 if f.repr and not (f.name == "pairing" and getattr(self, f.name) == "roll")]
        return f"{type(self).__qualname__}({', '.join(shown)})"


@dataclasses.dataclass(frozen=True, repr=False)
class _Mix(_Mixing):
    """Mixing with lambda from Beta(alpha, alpha)."""

    alpha: float = param(ALPHA, _ALPHA_DOC, default=1.0)
    pairing: str = param(PAIRING, _PAIRING_DOC, default="roll", structural=True)


# One set for the three operations: MixUpOrCutMix runs MixUp's or CutMix's code on its own keys.
_DRAWS = rnd.named_draws("lam", "center_y", "center_x", "switch")


@dataclasses.dataclass(frozen=True, repr=False)
class MixUp(_Mix):
    """Blend each image with its partner: ``lambda * x_i + (1 - lambda) * x_partner``
    (the partner by ``pairing``: see the module docstring)."""

    alpha: float = param(ALPHA, _ALPHA_DOC, default=0.2)

    def generate_code(self):
        flip = self.pairing == "flip"

        def mixup(xs, out, params, keys, values):
            (alpha,) = values
            n = xs.shape[0]
            dtype = Dtype.UINT8 if xs.itemsize == 1 else Dtype.FLOAT32
            for i in range(n):
                lam = rnd.beta(keys[i], _DRAWS.lam, alpha, alpha)
                partner = n - 1 - i if flip else (i + 1) % n
                params[i, 0], params[i, 1] = partner, lam
                a, b, dst = xs[i], xs[partner], out[i]
                if slip_mix_blend(a, image_bytes(a), b, image_bytes(b), dst, image_bytes(dst), a.size, dtype, lam):
                    raise ValueError(_BLEND_REFUSED)
            return out

        return mixup


@dataclasses.dataclass(frozen=True, repr=False)
class CutMix(_Mix):
    """Paste a box of the partner (by ``pairing``: see the module docstring)
    into each image: the box covers about ``1 - lambda`` of the area (side
    ratio ``sqrt(1 - lambda)``, center uniform, cut at the edges); the
    recorded lambda is the exact fraction of the image left unchanged."""

    alpha: float = param(ALPHA, _ALPHA_DOC, default=1.0)

    def _check(self, state: State) -> None:
        _check_mixable(self, state, (np.float32, np.float16))
        if len(state.shape) != 3 or (state.dtype == np.uint8 and state.shape[2] not in (1, 3, 4)) or \
                (state.dtype != np.uint8 and state.shape[0] not in (1, 3, 4)):
            raise ValueError(f"{type(self).__name__} cuts boxes out of (height, width, channels) uint8 images or "
                             f"the (channels, height, width) float samples of Normalize, got {state.shape} "
                             f"{state.dtype}")

    def generate_code(self):
        flip = self.pairing == "flip"

        def cutmix(xs, out, params, keys, values):
            (alpha,) = values
            n = xs.shape[0]
            if xs.itemsize == 1:  # (height, width, channels) uint8 images: one plane of whole pixels
                height, width, planes, pixel = xs.shape[1], xs.shape[2], 1, xs.shape[3]
            else:  # the (channels, height, width) float samples of Normalize: a plane per channel
                height, width, planes, pixel = xs.shape[2], xs.shape[3], xs.shape[1], xs.itemsize
            for i in range(n):
                lam = rnd.beta(keys[i], _DRAWS.lam, alpha, alpha)
                partner = n - 1 - i if flip else (i + 1) % n
                side = np.sqrt(1.0 - lam)
                cut_h, cut_w = int(height * side), int(width * side)
                cy = rnd.integers(keys[i], _DRAWS.center_y, 0, height)
                cx = rnd.integers(keys[i], _DRAWS.center_x, 0, width)
                top, bottom = max(cy - cut_h // 2, 0), min(cy + cut_h // 2, height)
                left, right = max(cx - cut_w // 2, 0), min(cx + cut_w // 2, width)
                a, b, dst = xs[i], xs[partner], out[i]
                if slip_mix_paste(a, image_bytes(a), b, image_bytes(b), dst, image_bytes(dst), planes, height,
                                  width, pixel, top, left, bottom, right):
                    raise ValueError(_PASTE_REFUSED)
                params[i, 0] = partner
                params[i, 1] = 1.0 - (bottom - top) * (right - left) / (height * width)
            return out

        return cutmix


@dataclasses.dataclass(frozen=True, repr=False)
class MixUpOrCutMix(_Mixing):
    """MixUp or CutMix, one of them per batch: CutMix with probability
    ``switch_prob``, else MixUp, as torchvision's reference recipes apply
    ``RandomChoice([MixUp(alpha=mixup_alpha), CutMix(alpha=cutmix_alpha)])``
    to each batch and timm's ``Mixup(mixup_alpha, cutmix_alpha,
    switch_prob)`` does in its default batch mode.  The choice is drawn from
    the key of the batch's first sample; :class:`MixLabels` mixes the labels
    of either.

    Args:
        mixup_alpha: MixUp's Beta(alpha, alpha) parameter.
        cutmix_alpha: CutMix's.
        switch_prob: the probability of CutMix for a batch, in [0, 1].
        pairing: each sample's partner, ``"roll"`` (torchvision's
            neighbour, the default) or ``"flip"`` (timm's): see the module
            docstring.
    """

    mixup_alpha: float = param(ALPHA, "MixUp's Beta(alpha, alpha) parameter", default=0.2)
    cutmix_alpha: float = param(ALPHA, "CutMix's Beta(alpha, alpha) parameter", default=1.0)
    switch_prob: float = param(PROBABILITY, "the probability of CutMix for a batch", default=0.5)
    pairing: str = param(PAIRING, _PAIRING_DOC, default="roll", structural=True)

    def _check(self, state: State) -> None:
        _check_mixable(self, state)  # MixUp blends: float32
        CutMix._check(self, state)

    def runtime_values(self) -> tuple[float, tuple[float], tuple[float]]:
        """The switch probability, then MixUp's values and CutMix's."""
        return (self.switch_prob, (self.mixup_alpha,), (self.cutmix_alpha,))

    def generate_code(self):
        from slipstream.compiler.jit import uncached_njit

        mixup = uncached_njit(MixUp(pairing=self.pairing).generate_code())
        cutmix = uncached_njit(CutMix(pairing=self.pairing).generate_code())

        def mix(xs, out, params, keys, values):
            switch, mixup_values, cutmix_values = values
            if xs.shape[0] and rnd.uniform(keys[0], _DRAWS.switch) < switch:
                return cutmix(xs, out, params, keys, cutmix_values)
            return mixup(xs, out, params, keys, mixup_values)

        return mix


@dataclasses.dataclass(frozen=True)
class _MixLabelsOp(Operation):
    num_classes: int = param(Int(1, 1 << 24), "the soft labels' length", structural=True)
    kind: ClassVar[Kind] = Kind.BATCH

    def declare(self, state: State):
        if state.shape != () or np.dtype(state.dtype).kind not in "iu":
            raise ValueError(f"MixLabels takes integer class labels, one per sample, got {state.shape} {state.dtype}")
        return State(shape=(self.num_classes,), dtype=np.float32), Allocation((self.num_classes,),
                                                                                         np.float32)

    def generate_code(self):
        classes = self.num_classes

        def mix_labels(labels, params, out, values):
            for i in range(labels.shape[0]):
                own, other = labels[i], labels[int(params[i, 0])]
                if not (0 <= own < classes and 0 <= other < classes):
                    raise ValueError("MixLabels: a label is outside [0, num_classes)")
                out[i, :] = 0.0
                lam = params[i, 1]
                out[i, own] += lam
                out[i, other] += 1.0 - lam
            return out

        return mix_labels


class MixLabels(Node):
    """The label side of :class:`MixUp` / :class:`CutMix`: reads this
    pipeline's integer labels and the mixing parameters of the operation
    object ``mix`` (in whichever pipeline holds it, or in pipeline
    ``pipeline`` when named), and gives (num_classes,) float32 soft labels.
    Place it right after the label decoder (it is the label pipeline's
    second entry; the loader puts the field's decoder in front)."""

    def __init__(self, mix: MixUp | CutMix | MixUpOrCutMix, num_classes: int, pipeline: OutputRef | None = None) -> None:
        super().__init__(_MixLabelsOp(num_classes))
        self.mix, self.source_pipeline = mix, pipeline
        self.target: Node | None = None

    def __repr__(self) -> str:
        where = "" if self.source_pipeline is None else f", pipeline={self.source_pipeline!r}"
        return f"MixLabels({self.mix!r}, num_classes={self.op.num_classes}{where})"

    def reads(self, find: Finder) -> Sequence[Input]:
        """The labels before it, and the mixing operation's parameters (its output ``params``)."""
        return (find.previous().output(), find.holding(self.mix, self.source_pipeline).output(MIXING))

    def emit_batch(self, ctx: EmitContext) -> list[ast.stmt]:
        mixing = ctx.node.inputs[1].node
        if mixing.stage != ctx.node.stage:
            raise PipelineError(f"MixLabels in pipeline {ctx.node.pipeline!r} must run in the same stage as "
                                f"{self.mix!r}")
        return [A.assign(ctx.target, ctx.call(ctx.batch_value(0), ctx.batch_value(1), *ctx.batch_outs()))]

    def describe(self) -> str:
        """``MixLabels(mix, num_classes=..., pipeline=...)``."""
        where = "" if self.source_pipeline is None else f", pipeline={self.source_pipeline!r}"
        return f"MixLabels({self.mix!r}, num_classes={self.op.num_classes}{where})"
