"""The textbook builds: ``make book``'s build, run into a scratch folder, ends without a warning
and writes the landing page, every page of ``_toc.yml`` and every figure a chapter places.

The figures are drawn afresh from the simulator (``python -m lab.figures``) and the notebooks are
staged without executing them (``python -m lab.book --no-execute``): tests/notebooks already runs
each notebook in smoke mode, so executing them again here would only double the suite's time.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "textbook"
GENERATED = ("_build", "notebooks", "figures")  # made by the build, never copied in


def _toc_files(node: object) -> list[str]:
    """Every ``file:`` entry of ``_toc.yml``, the root included, in reading order."""
    if isinstance(node, dict):
        found = [node[key] for key in ("root", "file") if key in node]
        return found + [f for value in node.values() for f in _toc_files(value)]
    if isinstance(node, list):
        return [f for item in node for f in _toc_files(item)]
    return []


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, drawn_figures: Path) -> tuple[Path, str]:
    """Build a copy of the textbook, with freshly drawn figures, into a scratch folder; return
    (html folder, build log)."""
    scratch = tmp_path_factory.mktemp("book")
    book = scratch / "textbook"
    shutil.copytree(BOOK, book, ignore=shutil.ignore_patterns(*GENERATED))
    shutil.copytree(drawn_figures, book / "figures")
    run = subprocess.run([sys.executable, "-m", "lab.book", str(book), "--no-execute",
                          "--out", str(scratch / "out")],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    log = re.sub(r"\x1b\[[0-9;]*m", "", run.stdout + run.stderr)
    assert run.returncode == 0, f"book build failed:\n{log[-4000:]}"
    return scratch / "out" / "_build" / "html", log


@pytest.mark.timeout(900)
def test_book_builds_without_warnings(built):
    _, log = built
    assert "build succeeded." in log
    warnings = [line for line in log.splitlines() if re.search(r"\b(WARNING|ERROR)\b", line)]
    assert not warnings, "\n".join(warnings)


@pytest.mark.timeout(900)
def test_every_toc_page_is_written(built):
    html, _ = built
    pages = _toc_files(yaml.safe_load((BOOK / "_toc.yml").read_text()))
    assert len([p for p in pages if p.startswith("part")]) >= 14
    assert len([p for p in pages if p.startswith("notebooks/")]) == len(
        list((ROOT / "notebooks").glob("*.ipynb")))
    missing = [p for p in pages if not (html / f"{p}.html").is_file()]
    assert not missing, f"pages not written: {missing}"


@pytest.mark.timeout(900)
def test_landing_page_says_how_to_run_the_lab(built):
    html, _ = built
    assert (html / "index.html").is_file()
    # the page's text, without tags: `make demo` is rendered as one <span> per word
    landing = " ".join(re.sub(r"<[^>]+>", " ", (html / "intro.html").read_text()).split())
    for command in ("make demo", "make test", "distml-lab list"):
        assert command in landing, f"the landing page does not mention {command!r}"


@pytest.mark.timeout(900)
def test_every_placed_figure_is_in_the_book(built):
    html, _ = built
    placed = {name for page in BOOK.rglob("*.md")
              for name in re.findall(r"\{figure\}\s+\S*?/figures/(\S+)", page.read_text())}
    assert placed
    missing = sorted(name for name in placed if not (html / "_images" / name).is_file())
    assert not missing, f"figures placed but not in the build: {missing}"
