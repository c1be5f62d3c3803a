"""Every notebook in notebooks/ runs top to bottom in a fresh kernel, so
that none of them rots as the library changes."""

from __future__ import annotations

import ast
import importlib
import os
import re
import sys
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
EXPECTED = ["01_quickstart", "02_custom_operation", "03_inside_the_compiler", "04_visual_checks", "05_from_ffcv",
            "06_detection", "07_training_recipes", "08_video"]

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


def test_every_expected_notebook_exists():
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == EXPECTED


def test_both_readmes_list_every_notebook():
    readme = (NOTEBOOKS.parent / "README.md").read_text()
    assert re.findall(r"^\| \[(\w+)\]\(notebooks/\1\.ipynb\) \|", readme, re.MULTILINE) == EXPECTED
    assert re.findall(r"^\| `(\w+)` \|", (NOTEBOOKS / "README.md").read_text(), re.MULTILINE) == EXPECTED


def test_the_docs_name_only_jupyter_commands_that_are_installed():
    """Each ``jupyter <command>`` the docs name is installed with the test
    extras (nbclient's ``execute``), or is JupyterLab's ``lab``, which they
    name with the notebooks extra that installs it."""
    pages = [NOTEBOOKS.parent / "README.md", NOTEBOOKS / "README.md", *(NOTEBOOKS.parent / "docs").glob("*.md")]
    named = {command for page in pages for command in re.findall(r"jupyter[ -]([a-z]+)", page.read_text())}
    assert "execute" in named
    bin_dir = Path(sys.executable).parent
    assert not [c for c in named - {"lab"} if not (bin_dir / f"jupyter-{c}").exists()], named


def _code(cell) -> ast.Module:
    return ast.parse("\n".join(line for line in cell.source.splitlines() if not line.startswith(("%", "!"))))


DRAW_FUNCTIONS = {"uniform", "uniform_range", "integers", "normal", "gamma", "beta"}


def _draw_number(call: ast.Call) -> ast.expr | None:
    """The draw number a call passes: slipstream.compiler.random's ``f(key, k, ...)``, or the uniform helper
    of a node's statements, ``A.call(ctx.helper("uniform"), key, A.const(k))``; None for any other call."""
    name = ast.unparse(call.func).rsplit(".", 1)[-1]
    if name in DRAW_FUNCTIONS and len(call.args) > 1:
        return call.args[1]
    if name == "call" and len(call.args) > 2 and ast.unparse(call.args[0]) == "ctx.helper('uniform')":
        number = call.args[2]
        return number.args[0] if isinstance(number, ast.Call) and number.args else number
    return None


def test_notebook_02_uses_the_public_api_and_named_draws_and_keys_as_the_docs_say():
    notebook = nbformat.read(NOTEBOOKS / "02_custom_operation.ipynb", as_version=4)
    trees = [_code(cell) for cell in notebook.cells if cell.cell_type == "code"]
    # What it imports from slipstream: a module's listed names (its __all__), or a whole module.
    for node in (n for tree in trees for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)):
        if node.module.split(".")[0] == "slipstream":
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert alias.name in getattr(module, "__all__", ()) or \
                    isinstance(getattr(module, alias.name), type(module)), f"{node.module}.{alias.name}"
    # Each draw by its name, none by a number (docs/compiler.md, "Randomness").
    calls = [n for tree in trees for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert sum(_draw_number(call) is not None for call in calls) >= 6
    assert not [ast.unparse(call) for call in calls if isinstance(_draw_number(call), ast.Constant)]
    # A key never depends on an operation's settings, as docs/compiler.md says and slipstream.compiler.random does.
    text = " ".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown").replace("\n", " ")
    compiler = (NOTEBOOKS.parent / "docs" / "compiler.md").read_text().replace("\n", " ")
    assert "never its settings" in text.lower() and "never its settings" in compiler
    assert "class and settings" not in text


def _images(notebook) -> int:
    return sum("image/png" in output.get("data", {}) for cell in notebook.cells if cell.cell_type == "code"
               for output in cell.get("outputs", []))


@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_runs_top_to_bottom(name, tmp_path):
    committed = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    env = {"SLIPSTREAM_CACHE_DIR": str(tmp_path / "cache")}  # the kernel inherits it: datasets of its own
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        client = nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                                         resources={"metadata": {"path": str(NOTEBOOKS)}})
        client.execute()  # raises CellExecutionError naming the failing cell
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    errors = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])
              if output.get("output_type") == "error"]
    assert errors == []
    # The pictures the committed notebook shows are drawn again.
    assert _images(notebook) == _images(committed)
    assert all(cell.get("execution_count") for cell in notebook.cells if cell.cell_type == "code" and cell.source)
