"""The textbook's figures: every ``{figure}`` directive of chapters 1–19 names a PNG that
``python -m lab.figures`` draws, every chapter has at least three, and drawing is
deterministic (same bytes twice)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lab.figures import FIGURES
from lab.figures.__main__ import main

TEXTBOOK = Path(__file__).resolve().parents[2] / "textbook"
CHAPTERS = sorted(p for part in ("part1", "part2", "part3", "part4", "part5", "part6")
                  for p in (TEXTBOOK / part).glob("ch*.md"))
DIRECTIVE = re.compile(r"^```\{figure\}\s+(\S+)\s*$", re.MULTILINE)


@pytest.fixture(scope="module")
def drawn(drawn_figures: Path) -> Path:
    """Every figure, drawn once into a temporary folder (shared with the book's build test)."""
    return drawn_figures


def directives(chapter: Path) -> list[str]:
    """The image paths of a chapter's figure directives, as written."""
    return DIRECTIVE.findall(chapter.read_text())


def test_chapters_one_to_twenty_three_are_all_found() -> None:
    assert [int(p.name[2:4]) for p in CHAPTERS] == list(range(1, 24))


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_has_three_figures_whose_images_are_drawn(chapter: Path,
                                                                drawn: Path) -> None:
    paths = directives(chapter)
    assert len(paths) >= 3, f"{chapter.name} has {len(paths)} figure directives"
    for written in paths:
        assert written.startswith("../figures/"), written  # textbook/figures, from partN/
        image = drawn / Path(written).name
        assert image.is_file(), f"{chapter.name} names {written}, which is not drawn"


def test_every_drawn_figure_is_a_non_empty_png_placed_in_its_chapter(drawn: Path) -> None:
    placed = {Path(p).stem for chapter in CHAPTERS for p in directives(chapter)}
    for name, (chapter, _) in FIGURES.items():
        data = (drawn / f"{name}.png").read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 1000, name
        assert name.startswith(f"ch{chapter:02d}-"), name
        assert name in placed, f"{name} is drawn but no chapter shows it"


def test_drawing_twice_gives_the_same_bytes(drawn: Path, tmp_path: Path) -> None:
    assert main([str(tmp_path), "--chapters", "1,14"]) == 0  # chapter 2's take half a minute
    again = sorted(tmp_path.glob("*.png"))
    assert again, "nothing drawn for chapters 1 and 14"
    for path in again:
        assert path.read_bytes() == (drawn / path.name).read_bytes(), path.name


def test_bad_chapter_list_exits_with_status_two(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path), "--chapters", "two"])
    assert exit_info.value.code == 2
