"""Every notebook in notebooks/ runs top to bottom (a notebook that breaks fails CI)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


MAX_NOTEBOOK_BYTES = 2_000_000
"""A notebook with its outputs stays readable on GitHub and cheap to clone."""


def test_there_are_notebooks():
    assert any(p.name == "00_quickstart.ipynb" for p in NOTEBOOKS)


def test_every_notebook_is_small():
    sizes = {p.name: p.stat().st_size for p in NOTEBOOKS}
    large = {name: f"{size / 1e6:.1f} MB" for name, size in sizes.items()
             if size > MAX_NOTEBOOK_BYTES}  # fmt: skip
    assert not large, f"notebooks over {MAX_NOTEBOOK_BYTES / 1e6:.0f} MB: {large}"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    # Run from a scratch folder so notebooks cannot litter the repo with outputs.
    NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors
