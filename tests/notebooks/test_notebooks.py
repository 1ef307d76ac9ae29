"""Every lab notebook runs top to bottom in smoke mode, and none is committed with outputs."""

import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT_S = 120


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_in_smoke_mode(path, tmp_path, monkeypatch):
    # The kernel inherits this environment; it runs in a scratch copy, so nothing it writes
    # lands in the tree.
    monkeypatch.setenv("DISTML_SMOKE", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    copy = shutil.copy(path, tmp_path / path.name)
    nb = nbformat.read(copy, as_version=4)
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError, with the cell and its traceback, on failure


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    dirty = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
             and (cell.outputs or cell.execution_count is not None)]
    assert not dirty, (f"{path.name}: code cells {dirty} have outputs or execution counts; "
                       f"clear them (jupyter nbconvert --clear-output --inplace {path.name})")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_is_a_page_of_the_textbook(notebook):
    toc = (notebook.parents[1] / "textbook" / "_toc.yml").read_text()
    assert f"notebooks/{notebook.stem}" in toc, f"add notebooks/{notebook.stem} to _toc.yml"
