"""Named outputs: an operation names its allocations, and references and
custom nodes read them by name.  The two examples of docs/compiler.md (an
operation with two named outputs, a custom node reading one) run here as
written there."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import slipstream as ss
from slipstream.compiler import ArraySource, Pipeline, RefNode

DOC = Path(__file__).resolve().parent.parent / "docs" / "compiler.md"


def doc_examples() -> list[str]:
    section = DOC.read_text().split("## Named outputs", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_documented_operation_and_node_are_short_and_work():
    examples = doc_examples()
    assert len(examples) == 2
    classes = [re.search(r"\n((?:@.*\n)?class .*?)(?=\n\n\n|\Z)", code, re.S).group(1) for code in examples]
    assert [len(c.splitlines()) <= 30 for c in classes] == [True, True], [len(c.splitlines()) for c in classes]
    namespace: dict = {}
    for code in examples:
        exec(compile(code, str(DOC), "exec"), namespace)
    images, batch, spreads = namespace["images"][:16], namespace["batch"], namespace["spreads"]
    low = images.reshape(16, -1).min(1).astype(np.float32)
    high = images.reshape(16, -1).max(1).astype(np.float32)
    np.testing.assert_array_equal(batch["range"], np.stack([low, high], 1))
    np.testing.assert_allclose(batch["image"], (images - low[:, None, None, None]) /
                               (high - low)[:, None, None, None], rtol=1e-6)
    np.testing.assert_array_equal(spreads, high - low)


def test_a_reference_to_an_output_the_operation_does_not_have_names_those_it_has():
    from slipstream.ops import MixUp

    images = np.zeros((8, 4, 4, 3), np.uint8)
    mix = MixUp(0.4)
    with pytest.raises(ss.PipelineError, match=r"MixUp\(alpha=0\.4\) has no output 'parameters' \(its named "
                                               r"outputs: 'params'\)"):
        Pipeline({"image": [ArraySource(images), mix],
                  "p": [RefNode("image", mix, output="parameters")]}).compile(8)


def test_a_named_output_read_by_a_later_stage_is_the_batch_it_held():
    """MixUp's parameters read through a reference after a torch stage: the
    reference runs where MixUp runs, and the later stage gets its batch."""
    from slipstream.ops import MixUp, ToTensor

    images = np.random.default_rng(1).integers(0, 256, (8, 4, 4, 3), dtype=np.uint8)
    mix = MixUp(0.4)
    compiled = Pipeline({"image": [ArraySource(images), mix, ToTensor()],
                         "params": [RefNode("image", mix, output="params")]}).compile(8, seed=3)
    out = compiled(np.arange(8))
    params = np.asarray(out["params"])
    assert params.shape == (8, 2) and params[:, 0].tolist() == [1, 2, 3, 4, 5, 6, 7, 0]
    assert ((0 <= params[:, 1]) & (params[:, 1] <= 1)).all()
