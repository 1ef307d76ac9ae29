"""Where a benchmark's results go: a new file for every run, written all at once.

A benchmark runs for minutes or hours on a machine that then has to be left alone, and its
numbers back a figure in the book. Losing them — to the next run writing the same name, or to
a crash half-way through a write — costs that time again. So every file a benchmark writes

* gets a name of its own, ``OUT/<stem>-<run id>.<ext>``, where the run id is the time the run
  started, ``YYYYmmdd-HHMMSS`` (local time). All the files of one run share it, so
  ``p2p_accuracy-20250101-120000.json`` and ``p2p_accuracy-20250101-120000.csv`` belong
  together. A name already taken (two runs started within one second) gets ``-2``, ``-3``, …:
  an existing result is never replaced;
* is written by :func:`simulator.core.atomic.write_atomic` (temporary file, ``fsync``,
  rename): a crash leaves no half-written result and no temporary file;
* is named and written under :func:`simulator.core.atomic.folder_lock` of ``OUT``, so two runs
  writing at once cannot both take one name.

:func:`latest` finds the newest result of a stem — the one a reader who wants "the" result
opens (``horovod_accuracy.py`` finds its calibration that way).

Every benchmark imports this module as ``_output`` (it runs as ``python benchmarks/x.py``, so
its own folder is on ``sys.path``) and takes ``--out`` from :func:`add_out`.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simulator.core.atomic import folder_lock, write_atomic

RESULTS = Path("benchmarks/results")
RUN_ID = time.strftime("%Y%m%d-%H%M%S")  # this run's start: the id in all its file names
OUT_HELP = ("results folder (default benchmarks/results); each run writes new files "
            "NAME-YYYYmmdd-HHMMSS.json/.csv there and never replaces an existing one")


def add_out(parser: argparse.ArgumentParser) -> None:
    """The ``--out`` option every benchmark takes: the results folder, with :data:`OUT_HELP`."""
    parser.add_argument("--out", type=Path, default=RESULTS, help=OUT_HELP)


def benchmark_args(doc: str, repeats: int = 15) -> argparse.Namespace:
    """``--repeats`` (at least 1: else a one-line error, exit status 2) and ``--out`` — the
    command line of the benchmarks that take nothing else."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=repeats, help="repeats per point")
    add_out(parser)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    return args


def _write_new(out: Path, stem: str, suffix: str, data: bytes) -> Path:
    """Write ``data`` to the first free name of ``stem`` in this run (``stem-RUN_ID.suffix``,
    else ``stem-RUN_ID-2.suffix``, …), atomically, holding the folder's lock from the choice
    of name to the rename so that no other writer can take the name meanwhile."""
    out.mkdir(parents=True, exist_ok=True)
    with folder_lock(out):
        path, n = out / f"{stem}-{RUN_ID}{suffix}", 1
        while path.exists():
            n += 1
            path = out / f"{stem}-{RUN_ID}-{n}{suffix}"
        write_atomic(path, data)
    return path


def write_json(doc: Any, out: Path, stem: str) -> Path:
    """``doc`` as indented JSON in a new file ``out/stem-RUN_ID.json``; returns its path."""
    return _write_new(out, stem, ".json", (json.dumps(doc, indent=2) + "\n").encode())


def write_csv(rows: Sequence[dict[str, Any]], out: Path, stem: str) -> Path:
    """Rows of dicts as CSV in a new file ``out/stem-RUN_ID.csv``; returns its path. The
    columns are every key of every row in first-seen order (a row without one leaves it
    empty); no rows give an empty file."""
    text = io.StringIO()
    if rows:
        fields = list(dict.fromkeys(key for row in rows for key in row))
        writer = csv.DictWriter(text, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return _write_new(out, stem, ".csv", text.getvalue().encode())


def write_records(records: Sequence[dict[str, Any]], out: Path, stem: str) -> Path:
    """A benchmark's records as ``stem-RUN_ID.csv`` and ``stem-RUN_ID.json``
    (``{"records": …}``) in ``out``; returns the JSON file's path."""
    write_csv(records, out, stem)
    return write_json({"records": list(records)}, out, stem)


def save_copy(source: Path, out: Path, stem: str) -> Path:
    """A copy of the file ``source`` (a calibration measured into a temporary folder) as a new
    result ``out/stem-RUN_ID<source's suffix>``; returns its path."""
    return _write_new(out, stem, source.suffix, source.read_bytes())


def latest(stem: str, out: Path = RESULTS, suffix: str = ".json") -> Path:
    """The newest result of ``stem`` in ``out``: the greatest run id, and within one run id the
    highest ``-n``. A file named plainly ``stem.suffix`` (written before results had run ids)
    counts as older than any of them. :class:`FileNotFoundError` if there is none."""
    name = re.compile(rf"{re.escape(stem)}(?:-(\d{{8}}-\d{{6}})(?:-(\d+))?)?{re.escape(suffix)}")
    found = []
    for path in out.glob(f"{stem}*{suffix}"):
        match = name.fullmatch(path.name)
        if match:
            found.append(((match[1] or "", int(match[2] or 1)), path))
    if not found:
        raise FileNotFoundError(f"no {stem}-YYYYmmdd-HHMMSS{suffix} in {out}")
    return max(found)[1]
