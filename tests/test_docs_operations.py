"""docs/operations.md against the code: a section for every operation, the
signature it shows equal to the real one, every parameter described, every
picture present and small, every link inside the page resolving."""

from __future__ import annotations

import ast
import inspect
import re
import struct
from pathlib import Path

import numpy as np
import pytest

from slipstream import ops
from slipstream.ops import batch, presets

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGE = DOCS / "operations.md"
TEXT = PAGE.read_text(encoding="utf-8")
LINES = TEXT.splitlines()
HEADING = re.compile(r"^(#{1,6}) (.*)$")
PRESETS = ["imagenet_train", "imagenet_val", "simclr", "multi_crop", "detection_train", "segmentation_train",
           "torchvision_train", "torchvision_val", "torchvision_vit_train", "timm_train", "deit_train"]


def documented() -> dict[str, object]:
    """Every documented name -> the object its signature is read from."""
    names: dict[str, object] = {}
    for name in ops.__all__:
        if name == "presets":
            names.update({f"presets.{f}": getattr(presets, f) for f in PRESETS})
        else:
            names[name] = getattr(ops, name)
    for name in batch.__all__:  # defined in slipstream.ops.batch and its batch_* modules, all exported there
        if inspect.isclass(obj := getattr(batch, name)):
            names[name] = obj
    return names


OBJECTS = documented()


def headings() -> list[tuple[int, int, str]]:
    """(line number, level, text) of every heading outside fenced code."""
    found, fenced = [], False
    for number, line in enumerate(LINES):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := HEADING.match(line)):
            found.append((number, len(match.group(1)), match.group(2).strip()))
    return found


def section(name: str) -> str:
    """The text under the heading `` `name` `` down to the next heading of the same or a higher level."""
    all_headings = headings()
    for k, (number, level, text) in enumerate(all_headings):
        if text == f"`{name}`":
            end = next((n for n, lv, _ in all_headings[k + 1:] if lv <= level), len(LINES))
            return "\n".join(LINES[number + 1:end])
    raise AssertionError(f"docs/operations.md has no heading `{name}`")


def shown_signature(name: str) -> inspect.Signature:
    """The signature of the first ```python block of the section, read as a call."""
    match = re.search(r"```python\n(.*?)\n```", section(name), re.DOTALL)
    assert match, f"the section of {name} shows no signature"
    call = ast.parse(match.group(1), mode="eval").body
    assert isinstance(call, ast.Call), f"the signature of {name} is not written as a call"
    assert ast.unparse(call.func) == name, f"the signature block of {name} calls {ast.unparse(call.func)}"
    parameters = [inspect.Parameter(arg.id, inspect.Parameter.POSITIONAL_OR_KEYWORD) for arg in call.args]
    for keyword in call.keywords:
        default = eval(compile(ast.Expression(keyword.value), PAGE.name, "eval"), {"np": np})
        parameters.append(inspect.Parameter(keyword.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default))
    return inspect.Signature(parameters)


def test_every_operation_has_a_section():
    titles = {text for _, _, text in headings()}
    missing = [name for name in dict.fromkeys([*ops.__all__, *OBJECTS]) if f"`{name}`" not in titles]
    assert not missing, f"no section in docs/operations.md for {missing}"


def test_the_overview_lists_every_operation():
    overview = TEXT.split("\n## Overview\n", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| \[`([\w.]+)`\]", overview, re.MULTILINE))
    expected = {name for name in OBJECTS if not name.startswith("presets.")} | {"presets"}
    assert listed == expected


@pytest.mark.parametrize("name", sorted(OBJECTS))
def test_the_shown_signature_is_the_real_one(name):
    real = inspect.signature(OBJECTS[name])
    shown = shown_signature(name)
    assert list(shown.parameters) == list(real.parameters), f"{name}: parameters differ"
    for parameter in real.parameters.values():
        default = shown.parameters[parameter.name].default
        if parameter.default is inspect.Parameter.empty:
            assert default is inspect.Parameter.empty, f"{name}({parameter.name}) has no default in the code"
        else:
            assert default == parameter.default, (f"{name}({parameter.name}): the page shows {default!r}, "
                                                  f"the code has {parameter.default!r}")


@pytest.mark.parametrize("name", sorted(OBJECTS))
def test_every_parameter_is_described(name):
    text = section(name)
    table = set(re.findall(r"^\| `(\w+)` \|", text, re.MULTILINE))
    parameters = set(inspect.signature(OBJECTS[name]).parameters)
    if name == "presets.multi_crop":  # described in the section of multi_crop_pipelines
        assert all(f"`{p}`" in text for p in parameters)
        return
    assert parameters <= table, f"{name}: no table row for {sorted(parameters - table)}"
    assert table <= parameters, f"{name}: the table describes {sorted(table - parameters)}, which it does not take"


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n" and header[12:16] == b"IHDR", f"{path} is not a PNG"
    return struct.unpack(">II", header[16:24])


def test_every_picture_exists_is_small_and_is_used():
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", TEXT)
    assert linked
    for link in linked:
        path = DOCS / link
        assert path.is_file(), f"docs/operations.md shows {link}, which does not exist"
        width, _ = png_size(path)
        assert width <= 640, f"{link} is {width} px wide"
        assert path.stat().st_size <= 64_000, f"{link} has {path.stat().st_size} bytes"
    on_disk = {f"images/operations/{p.name}" for p in (DOCS / "images" / "operations").glob("*.png")}
    assert on_disk <= set(linked), f"pictures no section shows: {sorted(on_disk - set(linked))}"


def slug(title: str, seen: dict[str, int]) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    base = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
    count = seen.get(base, 0)
    seen[base] = count + 1
    return base if count == 0 else f"{base}-{count}"


def test_links_inside_the_page_resolve():
    seen: dict[str, int] = {}
    anchors = {slug(text, seen) for _, _, text in headings()}
    targets = set(re.findall(r"\]\(#([^)]+)\)", TEXT))
    assert targets and targets <= anchors, f"links to missing headings: {sorted(targets - anchors)}"
    for link in re.findall(r"\]\(([^)#:]+)\)", TEXT):
        assert (DOCS / link).exists(), f"docs/operations.md links to {link}, which does not exist"
