"""Every notebook in notebooks/ runs top to bottom in a fresh kernel, so
that none of them rots as the library changes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
EXPECTED = ["01_quickstart", "02_custom_operation", "03_inside_the_compiler", "04_visual_checks", "05_from_ffcv",
            "06_detection", "07_training_recipes"]

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


def test_every_expected_notebook_exists():
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == EXPECTED


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
