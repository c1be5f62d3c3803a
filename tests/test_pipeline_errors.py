"""Mistakes a new user makes in a pipeline or a loader's arguments get a
message that names the pipeline and the entry and says what to write
instead, when the pipeline or the loader is built."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import slipstream as ss
from slipstream.compiler import ArraySource, Operation, Pipeline
from slipstream.ops import RandomHorizontalFlip, RandomResizedCrop


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("errors") / "small.slip"
    rng = np.random.default_rng(0)
    ss.write(path, [(rng.integers(0, 255, (40, 48, 3), dtype=np.uint8), k % 3) for k in range(16)],
             {"image": ss.RGBImageField("raw"), "label": ss.IntField()}, workers=0, verbose=False)
    return path


@pytest.mark.parametrize(("entry", "message"), [
    ("RandomResizedCrop", r"pipeline 'image', entry 0: 'RandomResizedCrop' is a string; a pipeline lists "
                          r"operation objects, e\.g\. \[slipstream\.ops\.RandomResizedCrop\(224\)"),
    (RandomResizedCrop, r"pipeline 'image', entry 0: RandomResizedCrop is a class, not an operation "
                        r"object: write RandomResizedCrop\(\.\.\.\) with its arguments"),
    (lambda x: x, r"pipeline 'image', entry 0: <function .*> is a plain callable, which a pipeline cannot compile "
                  r"or place: write an Operation \(docs/compiler\.md\), or wrap code over torch tensors in a "
                  r"torch\.nn\.Module"),
    (3, r"pipeline 'image', entry 0: 3 \(int\) is not an Operation, a Node or a torch\.nn\.Module"),
])
def test_entries_that_are_not_operations_are_named_with_what_to_write(dataset, entry, message):
    with pytest.raises(ss.PipelineError, match=message):  # before the loader puts the field's decoder in front
        ss.Loader(dataset, 4, {"image": [entry, RandomHorizontalFlip()]}, verbose=False)
    with pytest.raises(ss.PipelineError, match=message.replace("'image'", "'out'")):
        Pipeline({"out": [entry, ArraySource(np.zeros((4, 2), np.uint8))]}).compile(4)


def test_a_pipeline_that_is_not_a_list_is_refused(dataset):
    with pytest.raises(ss.PipelineError, match=r"pipeline 'image' must be a list of operations \(None drops a "
                                               r"field\), got RandomResizedCrop\("):
        ss.Loader(dataset, 4, {"image": RandomResizedCrop(32)}, verbose=False)


def test_a_device_this_machine_lacks_fails_when_the_loader_is_built(dataset):
    import torch

    wanted = f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"
    with pytest.raises(ss.ArgumentError, match=rf"device '{wanted}' was asked for, but torch finds"):
        ss.Loader(dataset, 4, {"image": [RandomResizedCrop(32)]}, device=wanted, verbose=False)
    with pytest.raises(ss.ArgumentError, match=r"device 'gpu0' is not a torch device"):
        ss.Loader(dataset, 4, {"image": [RandomResizedCrop(32)]}, device="gpu0", verbose=False)


def test_a_compiled_operation_after_a_torch_operation_is_refused_for_that_reason(dataset):
    import torch

    from slipstream.ops import MixUp, Normalize

    class Halve(torch.nn.Module):
        def forward(self, x):
            return x * 0.5

    with pytest.raises(ss.PipelineError, match=r"pipeline 'image': MixUp\(alpha=0\.2\) is compiled code, placed after "
                                               r"TorchOperation\(.*Halve.*\), a torch operation, whose output "
                                               r"\(.*torch\.float32.*\) it cannot take: .*Compiled operations work on "
                                               r"the arrays a pipeline makes before its torch operations: place it "
                                               r"before TorchOperation"):
        ss.Loader(dataset, 4, {"image": [RandomResizedCrop(32), Normalize(), Halve(), MixUp(0.2)]}, verbose=False)


def test_a_crop_that_needs_a_resize_before_it_says_so(dataset):
    from slipstream.ops import RandomCrop

    with pytest.raises(ValueError, match=r"RandomCrop\(size=\(24, 24\)\) in the pipeline of 'image' must follow "
                                         r"Resize\(shorter side\), as in \[Resize\(256\), RandomCrop\(224\)\]"):
        ss.Loader(dataset, 4, {"image": [RandomCrop(24)]}, verbose=False)


def test_a_crop_that_decodes_a_field_needs_the_loader():
    with pytest.raises(ss.PipelineError, match=r"pipeline 'out', entry 0: RandomResizedCrop\(.*\) decodes a field "
                                               r"of a dataset, so only slipstream.Loader, which knows the dataset, "
                                               r"can place it"):
        Pipeline({"out": [RandomResizedCrop(32)]}).compile(4)


def test_the_compiler_and_the_loader_take_the_same_operation_list(dataset):
    from slipstream.ops import Normalize, ToTensor

    def operations():
        return [ToTensor(), Normalize((0.5, 0.4, 0.3), (0.2, 0.25, 0.3))]  # folded into one pass by both

    with ss.Reader(dataset) as reader:
        images = np.stack([reader[k]["image"] for k in range(len(reader))])
    compiled = Pipeline([ArraySource(images), *operations()]).compile(16)
    expected = np.asarray(compiled(np.arange(16)))
    with ss.Loader(dataset, 16, {"image": operations(), "label": None}, order="sequential",
                   verbose=False) as loader:
        (batch,) = next(iter(loader))
    assert batch.shape == (16, 3, 40, 48) and np.array_equal(batch.numpy(), expected)


@pytest.mark.parametrize(("allocation", "says"), [
    (((4, 2), np.float32), r"allocates \(4, 2\) float32"),
    (((2, 4), np.uint8), r"allocates \(2, 4\) uint8"),
])
def test_an_allocation_that_disagrees_with_the_declared_output_is_refused_at_build(allocation, says):
    from slipstream.compiler import Allocation, Operation

    class Doubles(Operation):  # declares uint8 (4, 2) samples, but allocates other memory for them
        def declare(self, state):
            return state, Allocation(*allocation)

        def generate_code(self):
            def double(x, out, key):
                out[:] = x * 2
                return out

            return double

        def __repr__(self):
            return "Doubles()"

    pipeline = Pipeline({"out": [ArraySource(np.ones((8, 4, 2), np.uint8)), Doubles()]})
    with pytest.raises(ss.PipelineError, match=rf"pipeline 'out': Doubles\(\) declares its output as an array of "
                                               rf"shape \(4, 2\) and dtype uint8 but {says} for it: compiled code "
                                               rf"returns its first Allocation, so the two must have the same shape "
                                               rf"and dtype"):
        pipeline.compile(4)


def test_a_misspelt_output_name_is_refused_with_the_field_it_meant(dataset):
    """{"imgae": [...]} once became an extra view while "image" kept its
    default pipeline, and `images, labels = batch` swapped the two."""
    with pytest.raises(ss.ArgumentError, match=r"pipelines names output 'imgae' and gives it operations that do not "
                                               r"start with a decoder or a RefNode, but .*small\.slip has no field "
                                               r"'imgae'; did you mean 'image'\? \(fields: image, label\)\.  For "
                                               r"another output that reads a field, write 'imgae': "
                                               r"slipstream\.View\(field, \[operations\.\.\.\]\)"):
        ss.Loader(dataset, 4, {"imgae": [RandomResizedCrop(32)]}, verbose=False)
    with pytest.raises(ss.ArgumentError, match=r"pipelines names output 'lable' and drops it with None, but .* no "
                                               r"field 'lable'; did you mean 'label'\?"):
        ss.Loader(dataset, 4, {"lable": None}, verbose=False)
    with pytest.raises(ss.ArgumentError, match=r"output 'view_2' is a view of field 'imag', which .*small\.slip "
                                               r"does not have; did you mean 'image'\? \(fields: image, label\)"):
        ss.Loader(dataset, 4, {"view_2": ss.View("imag", [RandomResizedCrop(32)])}, verbose=False)


def test_outputs_come_in_the_order_the_user_wrote_them(dataset):
    loader = ss.Loader(dataset, 4, {"label": [], "image": [RandomResizedCrop(16)]}, order="sequential",
                       verbose=False)
    assert loader.output_names == ["label", "image"]
    labels, images = next(iter(loader))
    assert labels.tolist() == [0, 1, 2, 0] and tuple(images.shape) == (4, 16, 16, 3)
    views = ss.Loader(dataset, 4, ss.ops.presets.simclr(16), verbose=False)
    assert views.output_names == ["image", "view_2", "label"]  # the fields not named follow, in the file's order
    assert not ss.Loader(dataset, 4, {"view_2": ss.View("image", [RandomResizedCrop(16)])},
                         verbose=False).output_names.count("image")  # a viewed field is not also loaded whole


@dataclasses.dataclass(frozen=True)
class RefuseValue(Operation):
    """Raises on the samples whose first value is ``value``."""

    value: int

    def declare(self, state):
        return state, None

    def generate_code(self):
        value = self.value

        def refuse(x, key):
            if x.reshape(-1)[0] == value:
                raise ValueError("this value is refused")
            return x

        return refuse


def test_an_exception_in_compiled_code_names_the_operation_the_pipeline_and_the_sample(dataset):
    data = np.arange(40, dtype=np.int64).reshape(20, 2)
    compiled = Pipeline({"numbers": [ArraySource(data), RefuseValue(14)]}).compile(10)
    for _ in range(2):  # the first batch too (Numba loses an exception in a parallel loop's first run)
        with pytest.raises(ss.OperationError, match=r"^RefuseValue\(value=14\) in pipeline 'numbers' failed on "
                                                    r"sample 7: ValueError: this value is refused$") as err:
            compiled(np.arange(10))
        assert isinstance(err.value.__cause__, ValueError)
    assert compiled(np.arange(10, 20))["numbers"].shape == (10, 2)  # other batches are fine
    images = np.stack([np.full((8, 8, 3), k, np.uint8) for k in range(16)])
    path = dataset.parent / "values.slip"
    ss.write(path, {"image": images, "label": np.arange(16)}, {"image": ss.RGBImageField("raw"),
                                                               "label": ss.IntField()}, workers=0, verbose=False)
    loader = ss.Loader(path, 4, {"image": [RefuseValue(9)]}, order="sequential", verbose=False)
    with pytest.raises(ss.OperationError, match=r"values\.slip: batch 2 of epoch 0: RefuseValue\(value=9\) in "
                                                r"pipeline .image. failed on sample 9"):
        for _ in loader:
            pass
