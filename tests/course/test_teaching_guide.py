"""The teacher's guide (``docs/teaching.md``) stays true to the lab: it lists every exercise
with its points and the week it is set, and every file, module and ``make`` target it names
exists."""

import re
from pathlib import Path

from tests.exercises.points import POINTS

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "teaching.md"
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
PATH = re.compile(r"^\.?[\w.-]+(/[\w.-]+)*/?$")
TOP_FILE = re.compile(r"^(Makefile|[\w-]+\.(py|toml|md|ipynb|yml))$")


def _text() -> str:
    return GUIDE.read_text()


def _table_rows(text: str, columns: int) -> list[list[str]]:
    """The rows of the guide's Markdown tables that have ``columns`` cells (header and rule
    lines dropped)."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == columns and not set(cells[0]) <= set("-: "):
            rows.append(cells)
    return rows


def test_every_exercise_is_described_with_its_points():
    rows = {cells[0]: cells for cells in _table_rows(_text(), 4)}
    missing = [ex for ex in POINTS if ex not in rows]
    assert not missing, f"exercises missing from the guide's exercise table: {missing}"
    wrong = {ex: rows[ex][1] for ex in POINTS if rows[ex][1] != str(POINTS[ex])}
    assert not wrong, f"points in the guide differ from tests/exercises/points.py: {wrong}"


def test_every_exercise_is_set_in_exactly_one_week_of_the_plan_or_its_extension():
    rows = _table_rows(_text(), 5)
    weeks = [cells for cells in rows if cells[0].isdigit()]
    assert [int(w[0]) for w in weeks] == list(range(1, 15))
    extension = [cells for cells in rows if cells[0].startswith("+")]  # Parts 5 and 6
    assert [w[0] for w in extension] == ["+1", "+2", "+3", "+4"]
    set_in = [ex for w in weeks + extension for ex in re.findall(r"\b\d{1,2}\.\d+\b", w[3])]
    assert sorted(set_in) == sorted(POINTS), "each exercise once in the weekly plan"


def test_every_path_the_guide_names_exists():
    inline = re.findall(r"`([^`\n]+)`", FENCE.sub("", _text()))
    # a path: no spaces, and a slash or a file name's suffix; .venv is made by `make setup`
    paths = [t for t in inline if PATH.match(t) and ("/" in t or TOP_FILE.match(t))
             and not t.startswith(".venv")]
    assert "docs/teaching.md" not in paths and len(paths) > 40, "the pattern is broken"
    missing = sorted({p for p in paths if not (ROOT / p).exists()})
    assert not missing, f"the guide names files that do not exist: {missing}"


def test_every_module_and_make_target_the_guide_runs_exists():
    text = _text()
    modules = re.findall(r"python -m ([\w.]+)", text)
    missing = [m for m in modules
               if not (ROOT / (m.replace(".", "/") + ".py")).exists()]
    assert not missing, f"modules run by the guide that do not exist: {missing}"
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))
    named = set(re.findall(r"\bmake (\w+)", text))
    assert named and named <= targets, f"make targets that do not exist: {named - targets}"
