"""Every chapter's accuracy, both model tiers, over independent runs — through the registry.

Each run makes a fresh quick calibration of this machine (``distml-lab calibrate --quick`` into a
file of its own), then for every chosen twin runs ``distml-lab compare TWIN --quick --world 2
--model both --json`` — the same command a reader runs — and keeps each point's error of the
textbook tier and of the host tier. With ``--before PATH`` (a checkout of an earlier version of
the lab, e.g. a ``git worktree``) each twin is also compared by that checkout's own command line,
on the same calibration file, right before the current one: the "before" column of a change.

The table gives, per chapter, the median over runs of the chapter's median |error| (over its
twins' points), with the min–max over runs. Results go to ``benchmarks/results/``
(``book_accuracy-<run id>.json`` and ``.csv``).

    .venv/bin/python benchmarks/book_accuracy.py --runs 3
    .venv/bin/python benchmarks/book_accuracy.py --runs 3 --before /tmp/lab-before
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from lab.strategies import all_strategies
from lab.twins import all_twins

from _output import add_out, write_csv, write_json

COLLECTIVES = ("ping_pong", "broadcast.binomial", "all_reduce.ring")
"""The collectives compared by default (the tour's, one per kind of algorithm)."""


def twins(names: str | None) -> list[tuple[str, str]]:
    """``(name, chapter)`` of every twin to compare: ``names`` (comma-separated) or the
    default — :data:`COLLECTIVES` and every strategy twin."""
    known = {t.name: t.chapter for t in [*all_twins(), *all_strategies()]}
    chosen = names.split(",") if names else [*COLLECTIVES, *(t.name for t in all_strategies())]
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise SystemExit(f"book_accuracy: unknown twins {unknown}")
    return [(n, known[n]) for n in chosen]


def compare(repo: Path, name: str, calibration: Path, both: bool) -> list[dict[str, Any]]:
    """``distml-lab compare NAME --quick --world 2`` of the checkout ``repo``: its records."""
    argv = [sys.executable, "-m", "lab.cli", "compare", name, "--quick", "--world", "2",
            "--json", "--calibration", str(calibration)]
    if both:
        argv += ["--model", "both"]
    done = subprocess.run(argv, cwd=repo, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"book_accuracy: {name} in {repo} failed: "
                         f"{done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)["records"]


def errors(records: list[dict[str, Any]], key: str) -> list[float]:
    """|error| of every point under ``key`` (``rel_error`` or ``rel_error_textbook`` …)."""
    return [abs(r[key]) for r in records if r.get(key) is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="independent runs (default 3)")
    parser.add_argument("--twins", help="comma-separated twin names (default: see COLLECTIVES "
                        "and every strategy twin)")
    parser.add_argument("--before", type=Path, help="an earlier checkout to compare with")
    parser.add_argument("--world", default="2,3,4", help="worlds calibrated per run")
    add_out(parser)
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    here = Path(__file__).resolve().parent.parent
    chosen = twins(args.twins)
    rows = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="book-accuracy-") as tmp:
            cal = Path(tmp) / "calibration.json"
            subprocess.run([sys.executable, "-m", "lab.cli", "calibrate", "--world", args.world,
                            "--quick", "--calibration", str(cal)], cwd=here, check=True,
                           capture_output=True, timeout=1800)
            for name, chapter in chosen:
                row: dict[str, Any] = {"run": run, "twin": name, "chapter": chapter}
                if args.before is not None:
                    old = compare(args.before, name, cal, both=False)
                    row["before_host"] = statistics.median(errors(old, "rel_error"))
                new = compare(here, name, cal, both=True)
                row["textbook"] = statistics.median(errors(new, "rel_error_textbook"))
                row["host"] = statistics.median(errors(new, "rel_error_host"))
                print(json.dumps(row), file=sys.stderr)
                rows.append(row)
    write_csv(rows, args.out, "book_accuracy")
    summary = table(rows, args.runs)
    write_json({"runs": args.runs, "rows": rows, "chapters": summary}, args.out,
                       "book_accuracy")
    columns = [c for c in ("before_host", "textbook", "host") if c in rows[0]]
    print("| chapter | twins | " + " | ".join(f"{c} median (min–max)" for c in columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for chapter, doc in summary.items():
        cells = [f"{doc[c]['median']:.1%} ({doc[c]['min']:.1%}–{doc[c]['max']:.1%})"
                 for c in columns]
        print(f"| {chapter} | {', '.join(doc['twins'])} | " + " | ".join(cells) + " |")


def table(rows: list[dict[str, Any]], runs: int) -> dict[str, dict[str, Any]]:
    """Per chapter: its twins and, per column, the median/min/max over runs of the chapter's
    median |error| in that run (the median over its twins' medians)."""
    out: dict[str, dict[str, Any]] = {}
    for chapter in dict.fromkeys(r["chapter"] for r in rows):
        mine = [r for r in rows if r["chapter"] == chapter]
        doc: dict[str, Any] = {"twins": list(dict.fromkeys(r["twin"] for r in mine))}
        for column in ("before_host", "textbook", "host"):
            if column not in mine[0]:
                continue
            per_run = [statistics.median(r[column] for r in mine if r["run"] == run)
                       for run in range(runs)]
            doc[column] = {"median": statistics.median(per_run), "min": min(per_run),
                           "max": max(per_run)}
        out[chapter] = doc
    return out


if __name__ == "__main__":
    main()
