"""``tests.halves`` runs every test exactly once: its two halves cover the test folders
without overlap, and a missing path is refused before anything runs."""

from pathlib import Path

from tests import halves

TESTS = Path(__file__).resolve().parent


def test_the_halves_hold_every_test_file_once() -> None:
    files = {p.relative_to(TESTS.parent) for p in TESTS.rglob("test_*.py")}
    owners = {f: [path for half in halves.HALVES for path in half
                  if f == Path(path) or Path(path) in f.parents] for f in files}
    assert not [f for f, o in owners.items() if len(o) != 1], owners


def test_a_missing_path_is_refused_with_status_2(monkeypatch, capsys) -> None:
    monkeypatch.setattr(halves, "HALVES", (("tests/no_such_folder",), ("tests/lab",)))
    assert halves.main(["-q"]) == 2
    assert "tests/no_such_folder" in capsys.readouterr().err
