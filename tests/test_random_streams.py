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
    from slipstream.compiler import ArraySource, Pipeline, RefNode
    from test_compiler import DrawUniform, FlipX

    images = np.arange(10 * 4 * 4 * 3, dtype=np.uint8).reshape(10, 4, 4, 3)
    plain = Pipeline([ArraySource(images), DrawUniform()]).compile(10)(np.arange(10)).copy()
    edited = Pipeline([ArraySource(images), FlipX(), DrawUniform()]).compile(10)(np.arange(10))
    np.testing.assert_array_equal(plain, edited)
    moved = Pipeline({"other": [RefNode("output")],  # every node id shifts
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


def _jitter_class(*extra_fields):
    """An operation class named Jitter (a scaled uniform per sample), with
    ``extra_fields`` besides its ``scale``: the same class before and after
    its author adds a field with a default."""
    import dataclasses

    from slipstream.compiler import Allocation, Operation, State
    from slipstream.compiler import random as rnd

    draws = rnd.named_draws("value")

    def declare(self, state):
        return State(shape=(), dtype=np.float64), Allocation((), np.float64)

    def generate_code(self):
        uniform, scale = rnd.uniform, float(self.scale)

        def jitter(x, out, key):
            out[0] = scale * uniform(key, draws.value)
            return out

        return jitter

    return dataclasses.make_dataclass("Jitter", [("scale", float, 1.0), *extra_fields], bases=(Operation,),
                                      frozen=True, namespace={"declare": declare, "generate_code": generate_code})


def test_renaming_an_output_changing_or_adding_a_setting_or_inserting_another_kind_keeps_the_other_draws():
    from slipstream.compiler import ArraySource, Pipeline
    from test_compiler import DrawUniform, FlipX

    images = np.arange(10 * 4 * 4 * 3, dtype=np.uint8).reshape(10, 4, 4, 3)
    jitter, jitter_with_a_new_field = _jitter_class(), _jitter_class(("mode", str, "uniform"))

    def run(pipelines):
        out = Pipeline(pipelines).compile(10)(np.arange(10))
        return {name: value.copy() for name, value in out.items()}

    def outputs(first=(), scale=1.0, cls=jitter, other="b"):
        return {"a": [ArraySource(images), *first, cls(scale), DrawUniform()],
                other: [ArraySource(images), DrawUniform()]}

    base = run(outputs())
    renamed = run(outputs(other="c"))
    rescaled = run(outputs(scale=2.0))
    with_a_field = run(outputs(cls=jitter_with_a_new_field))
    inserted = run(outputs(first=[FlipX()]))
    for changed in (renamed, rescaled, with_a_field, inserted):  # the draws of "a"'s last operation
        np.testing.assert_array_equal(changed["a"], base["a"])
    for changed in (rescaled, with_a_field, inserted):  # and of the other output
        np.testing.assert_array_equal(changed["b"], base["b"])
    np.testing.assert_array_equal(renamed["c"], base["b"])  # a renamed output draws as it did: no name keys a stream
    assert len(set(base["a"].tolist())) == 10


# ---------------------------------------------------------------- named draws

_COMPILED_DRAWS = None  # set by the test below: a module-level named tuple, as operations keep theirs


def test_named_draw_numbers_depend_only_on_their_names():
    from numba import njit

    from slipstream.compiler import random as rnd

    first = rnd.named_draws("top", "left", "flip")
    grown = rnd.named_draws("area", "top", "left", "aspect", "flip")  # names added, in another order
    shrunk = rnd.named_draws("flip")
    assert (grown.top, grown.left, grown.flip) == (first.top, first.left, first.flip)
    assert shrunk.flip == first.flip == rnd.draw_number("flip")
    assert len(set(grown)) == 5
    # every number, with its block and the 2k + 1 of normal(), inside int64
    assert all(0 <= n and 2 * (n + rnd.DRAW_BLOCK) + 1 < 2**63 for n in grown)

    global _COMPILED_DRAWS
    _COMPILED_DRAWS = first

    @njit
    def drawn(key):  # compiled code reads the names as constants
        return rnd.uniform(key, _COMPILED_DRAWS.flip), rnd.uniform(key, _COMPILED_DRAWS.top + 3)

    assert drawn(12345) == (rnd.uniform(12345, first.flip), rnd.uniform(12345, first.top + 3))


def test_named_draws_whose_blocks_overlap_are_refused():
    import pytest

    from slipstream.compiler import random as rnd

    with pytest.raises(ValueError, match="named draws 'a' and 'b' overlap|named draws 'b' and 'a' overlap"):
        rnd.named_draws("a", "b", block=2**60)  # first numbers lie below 2**60: any two such blocks overlap
    with pytest.raises(ValueError, match="given twice"):
        rnd.named_draws("top", "left", "top")
    with pytest.raises(ValueError, match="identifier"):
        rnd.named_draws("top left")


# ---------------------------------------------------------------- explicit keys


def _drawn(pipelines, output):
    from slipstream.compiler import Pipeline

    return np.array(Pipeline(pipelines).compile(10)(np.arange(10))[output])


def test_a_keyed_operation_keeps_its_draws_when_its_output_is_renamed_or_an_alike_operation_comes_first():
    import slipstream as ss
    from slipstream.compiler import ArraySource
    from test_compiler import DrawUniform

    images = np.arange(10 * 4 * 4 * 3, dtype=np.uint8).reshape(10, 4, 4, 3)
    keyed = _drawn({"output": [ArraySource(images), ss.Keyed(DrawUniform(), key="draw")]}, "output")
    renamed = _drawn({"renamed": [ArraySource(images), ss.Keyed(DrawUniform(), key="draw")]}, "renamed")
    after_alike = _drawn({"output": [ArraySource(images), DrawUniform(), ss.Keyed(DrawUniform(), key="draw")]},
                         "output")
    np.testing.assert_array_equal(keyed, renamed)
    np.testing.assert_array_equal(keyed, after_alike)
    # unkeyed, renaming keeps the stream (no name keys it), an alike operation first moves it
    plain = _drawn({"output": [ArraySource(images), DrawUniform()]}, "output")
    np.testing.assert_array_equal(plain, _drawn({"renamed": [ArraySource(images), DrawUniform()]}, "renamed"))
    assert not np.array_equal(plain, _drawn({"output": [ArraySource(images), DrawUniform(), DrawUniform()]}, "output"))


def test_a_keyed_node_draws_alike_in_two_outputs():
    import slipstream as ss
    from slipstream.compiler import ArraySource, RandomApply
    from test_compiler import FlipX

    images = np.arange(10 * 4 * 4 * 3, dtype=np.uint8).reshape(10, 4, 4, 3)
    flips = {name: [ArraySource(images), ss.Keyed(RandomApply(FlipX(), p=0.5), key="flip")] for name in ("a", "b")}
    np.testing.assert_array_equal(_drawn(flips, "a"), _drawn(flips, "b"))
    unkeyed = {name: [ArraySource(images), RandomApply(FlipX(), p=0.5)] for name in ("a", "b")}
    assert not np.array_equal(_drawn(unkeyed, "a"), _drawn(unkeyed, "b"))


def test_the_same_key_in_two_outputs_of_a_loader_crops_them_alike(tmp_path):
    import slipstream as ss
    from slipstream.ops import RandomHorizontalFlip, RandomResizedCrop

    path = dataset(tmp_path, raw=True)

    def crops(key):
        def crop():
            return ss.Keyed(RandomResizedCrop(32), key=key) if key else RandomResizedCrop(32)
        return _batches(path, {"image": [crop()], "view_2": ss.View("image", [crop()]), "label": []})

    alike = crops("crop")
    assert [b["image"] for b in alike] == [b["view_2"] for b in alike]
    unkeyed = crops(None)
    assert [b["image"] for b in unkeyed] != [b["view_2"] for b in unkeyed]
    # renamed, and followed by a flip (a keyed crop does not take it in): the crop keeps its draws
    renamed = _batches(path, {"renamed": ss.View("image", [ss.Keyed(RandomResizedCrop(32), key="crop")]),
                              "label": []})
    assert [b["renamed"] for b in renamed] == [b["image"] for b in alike]
    flipped = _batches(path, {"image": [ss.Keyed(RandomResizedCrop(32), key="crop"), RandomHorizontalFlip(0.0)],
                              "label": []})
    assert [b["image"] for b in flipped] == [b["image"] for b in alike]


def test_the_same_key_twice_in_one_output_is_refused(tmp_path):
    import pytest

    import slipstream as ss
    from slipstream.compiler import ArraySource, Pipeline
    from slipstream.ops import RandomHorizontalFlip, RandomResizedCrop
    from test_compiler import DrawUniform, FlipX

    images = np.zeros((4, 4, 4, 3), np.uint8)
    with pytest.raises(ss.PipelineError, match=r"key 'k' to both FlipX\(\) and DrawUniform\(\)"):
        Pipeline([ArraySource(images), ss.Keyed(FlipX(), key="k"), ss.Keyed(DrawUniform(), key="k")]).compile(4)
    path = dataset(tmp_path, raw=True)
    with pytest.raises(ss.PipelineError, match=r"'image' gives key 'k' to both .*RandomHorizontalFlip"):
        ss.Loader(path, 8, {"image": [ss.Keyed(RandomResizedCrop(32), key="k"),
                                      ss.Keyed(RandomHorizontalFlip(), key="k")]}, verbose=False)


def test_renaming_every_output_of_a_loader_keeps_every_draw(tmp_path):
    """Outputs renamed (the field's own output made a view of another name,
    a view renamed, their order kept): every batch is byte-identical, as
    no name keys a random stream."""
    import slipstream as ss
    from slipstream.ops import ColorJitter, RandomHorizontalFlip, RandomResizedCrop, RandomSolarize

    path = dataset(tmp_path, raw=True)
    first = [RandomResizedCrop(32), RandomHorizontalFlip(), ColorJitter(0.4, 0.4, 0.4)]
    second = [RandomResizedCrop(24), RandomHorizontalFlip(), RandomSolarize(100, 0.5)]
    named = _batches(path, {"image": first, "view_2": ss.View("image", second), "label": []})
    renamed = _batches(path, {"global": ss.View("image", first), "local": ss.View("image", second),
                              "target": ss.View("label", [])})
    assert [b["image"] for b in named] == [b["global"] for b in renamed]
    assert [b["view_2"] for b in named] == [b["local"] for b in renamed]
    assert [b["label"] for b in named] == [b["target"] for b in renamed]
    assert len({b["image"] for b in named} | {b["view_2"] for b in named}) == 2 * len(named)  # views differ
