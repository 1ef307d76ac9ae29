"""Every lab notebook runs top to bottom in smoke mode, leaves no temporary folder behind, and
none is committed with outputs."""

import ast
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT_S = 120
TEMPORARY = {"TemporaryDirectory", "NamedTemporaryFile", "mkdtemp", "mkstemp"}


def _chapter_folders(notebook: Path) -> set[Path]:
    """The temporary folders of ``notebook``'s prefix (``distml-ch01-…`` for 01_overview)."""
    chapter = notebook.stem.split("_")[0]
    return set(Path(tempfile.gettempdir()).glob(f"distml-ch{chapter}-*"))


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
    before = _chapter_folders(path)
    client.execute()  # raises CellExecutionError, with the cell and its traceback, on failure
    # Once the lab has spawned ranks the kernel does not exit within the shutdown grace and is
    # killed, so Python's exit hooks never run: only a folder its own cell removes is gone.
    assert not _chapter_folders(path) - before, f"{path.name} left a temporary folder"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_temporary_folders_live_for_one_cell(path):
    # a temporary folder or file is the context of a with statement, removed when it ends
    nb = nbformat.read(path, as_version=4)
    loose = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        tree = ast.parse(cell.source)
        held = {id(item.context_expr) for node in ast.walk(tree) if isinstance(node, ast.With)
                for item in node.items}
        loose += [f"cell {i}, line {node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Call) and id(node) not in held
                  and getattr(node.func, "attr", getattr(node.func, "id", None)) in TEMPORARY]
    assert not loose, f"{path.name}: temporary folders outside a with block at {loose}"


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
