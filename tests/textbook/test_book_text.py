"""The textbook's pages, read as files: every chapter has its figures, its learning goals, its
lab box and its review questions with answers, and no page tells the history of runs on one
machine (those notes live in benchmarks/NOTES.md)."""

import re
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parents[2] / "textbook"
CHAPTERS = sorted(BOOK.glob("part*/ch*.md"))
ANSWERS = (BOOK / "appendix_answers.md").read_text()
RUN_HISTORY = re.compile(r"\bsessions?\b|\bvirtual machine\b|\bthis machine\b|\bflock\b"
                         r"|\b(first|second|third|\w+(-\w+)?th) runs\b", re.IGNORECASE)


def _chapter(path: Path) -> int:
    return int(re.match(r"ch(\d+)", path.name).group(1))


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_written_chapter_places_three_figures(path):
    assert len(re.findall(r"^```\{figure\}", path.read_text(), re.M)) >= 3


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_has_goals_lab_box_summary_and_questions(path):
    text = path.read_text()
    assert text.find(":::{admonition} Learning goals") < text.find("\n## ")
    assert ":::{admonition} Try it in the lab" in text
    assert "\n## Summary\n" in text
    questions = text.split("\n## Review questions\n", 1)[1].split("\n## ", 1)[0]
    asked = len(re.findall(r"^\d+\. ", questions, re.M))
    assert 4 <= asked <= 8


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_every_review_question_has_an_answer(path):
    n = _chapter(path)
    label = f"(ans-ch{n:02d})=" if n < 15 else f"(ans-ch{n})="
    section = ANSWERS.split(label, 1)[1].split("\n(ans-ch", 1)[0]
    questions = path.read_text().split("\n## Review questions\n", 1)[1]
    asked = re.findall(r"^\d+\. (.+)$", questions, re.M)
    answered = re.findall(r"^\d+\. \*(.+)\*$", section, re.M)
    assert asked == answered


@pytest.mark.parametrize("path", sorted(BOOK.rglob("*.md")), ids=lambda p: p.stem)
def test_page_has_no_run_history_and_no_private_paths(path):
    text = path.read_text()
    assert not RUN_HISTORY.search(text), RUN_HISTORY.search(text).group(0)
    assert "../shared/" not in text
