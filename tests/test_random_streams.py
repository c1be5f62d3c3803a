"""Random streams are keyed by what an operation is, not by where it
stands: editing one pipeline leaves the batches of the others unchanged."""

from __future__ import annotations

import numpy as np

from test_determinism import dataset, digest


def _batches(path, pipelines, seed=5):
    import slipstream as ss

    with ss.Loader(path, 8, pipelines, order=ss.Order("random", seed=seed), as_dict=True, verbose=False) as loader:
        return [{name: digest(value) for name, value in batch.items()} for batch in loader]


def test_inserting_an_operation_into_one_pipeline_leaves_another_output_byte_identical(tmp_path):
    import slipstream as ss
    from slipstream.ops import ColorJitter, RandomHorizontalFlip, RandomResizedCrop, RandomSolarize

    path = dataset(tmp_path, raw=True)

    def pipelines(extra):
        return {"image": [RandomResizedCrop(32), RandomHorizontalFlip(), *extra],
                "view_2": ss.View("image", [RandomResizedCrop(24), ColorJitter(0.4, 0.4, 0.4)]),
                "label": []}

    before = _batches(path, pipelines([]))
    after = _batches(path, pipelines([RandomSolarize(100, 0.5)]))
    assert [b["view_2"] for b in before] == [a["view_2"] for a in after]
    assert [b["label"] for b in before] == [a["label"] for a in after]
    assert [b["image"] for b in before] != [a["image"] for a in after]  # the edited output did change


def test_an_operation_keeps_its_stream_when_another_is_inserted_before_it_in_its_own_pipeline():
    """ArraySource, then a deterministic operation inserted, then a random
    one: the random draws (here the brightness each sample gets) stay the
    same, since the inserted operation is not alike."""
    from slipstream.compiler import ArraySource, Pipeline
    from slipstream.ops import Normalize
    from test_compiler import DrawUniform, FlipX

    images = np.arange(10 * 4 * 4 * 3, dtype=np.uint8).reshape(10, 4, 4, 3)
    plain = Pipeline([ArraySource(images), DrawUniform()]).compile(10)(np.arange(10)).copy()
    edited = Pipeline([ArraySource(images), FlipX(), DrawUniform()]).compile(10)(np.arange(10))
    np.testing.assert_array_equal(plain, edited)
    moved = Pipeline({"other": [ArraySource(images), Normalize(dtype=np.float32)],  # every node id shifts
                      "output": [ArraySource(images), DrawUniform()]}).compile(10)(np.arange(10))
    np.testing.assert_array_equal(plain, moved["output"])


def test_changing_an_operation_s_settings_keeps_every_stream():
    """Streams are keyed by the kinds of operations and their places among
    their kind, not by settings: two alike operations keep their draws when
    the first one's setting changes (keyed by settings, the second would
    have become the first of its description, and drawn the first's
    numbers), and so does the changed one."""
    from slipstream.compiler import ArraySource, Pipeline
    from test_compiler import DrawUniform

    images = np.arange(10 * 4 * 4 * 3, dtype=np.uint8).reshape(10, 4, 4, 3)

    class ScaledDraw(DrawUniform):
        def __init__(self, scale: float) -> None:
            self.scale = scale

        def __repr__(self) -> str:
            return f"ScaledDraw({self.scale})"

    def streams(first_scale: float) -> list[int]:
        pipeline = Pipeline({"output": [ArraySource(images), ScaledDraw(first_scale), ScaledDraw(1.0)]})
        return [node.stream for node in pipeline.compile(10).graph.pipelines["output"]]

    same, changed = streams(1.0), streams(2.0)
    assert changed == same and len(set(same)) == 3  # every node its own stream, none moved by the setting

    def drawn(first_scale: float) -> np.ndarray:  # what the second operation draws
        return Pipeline([ArraySource(images), ScaledDraw(first_scale), ScaledDraw(1.0)]).compile(10)(np.arange(10))

    np.testing.assert_array_equal(drawn(1.0).copy(), drawn(2.0))
