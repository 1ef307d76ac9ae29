"""Build the textbook (``make book``): notebooks copied in, executed in smoke mode, then
Jupyter Book 1 (Sphinx based, works offline).

    python -m lab.book textbook [--no-execute] [--out DIR]

The notebooks live in ``notebooks/`` without outputs; the book shows them *with* outputs, so
each is copied to ``textbook/notebooks/`` and executed there (``DISTML_SMOKE=1``, a temporary
calibration file) before the build. Warnings fail the build.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from backends.launch import temporary_env

ROOT = Path(__file__).resolve().parents[1]


def stage_notebooks(book: Path, execute: bool = True) -> list[Path]:
    """Copy ``notebooks/*.ipynb`` into ``book/notebooks`` (executed unless told not to)."""
    import nbformat
    from nbclient import NotebookClient

    target = book / "notebooks"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    staged = []
    with tempfile.TemporaryDirectory() as tmp:
        # MPLBACKEND unset: the kernel's inline backend puts the figures into the book
        env = {"DISTML_SMOKE": "1", "DISTML_CALIBRATION": str(Path(tmp) / "calibration.json"),
               "MPLBACKEND": None}
        with temporary_env(env):
            for source in sorted((ROOT / "notebooks").glob("*.ipynb")):
                nb = nbformat.read(source, as_version=4)  # type: ignore[no-untyped-call]
                if execute:
                    print(f"executing {source.name} (smoke mode) ...", file=sys.stderr)
                    NotebookClient(nb, timeout=300, kernel_name="python3",
                                   resources={"metadata": {"path": str(ROOT / "notebooks")}}
                                   ).execute()
                nbformat.write(nb, target / source.name)  # type: ignore[no-untyped-call]
                staged.append(target / source.name)
    return staged


def build(book: Path, out: Path | None = None, execute: bool = True) -> Path:
    """Stage the notebooks and build the HTML book; return the HTML folder."""
    stage_notebooks(book, execute)
    cmd = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(book),
           "--warningiserror", "--keep-going"]
    if out is not None:
        cmd += ["--path-output", str(out)]
    subprocess.run(cmd, check=True)
    return (out or book) / "_build" / "html"


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m lab.book textbook [--no-execute] [--out DIR]``."""
    parser = argparse.ArgumentParser(prog="python -m lab.book", description=__doc__)
    parser.add_argument("book", type=Path, help="the textbook folder")
    parser.add_argument("--no-execute", action="store_true", help="copy notebooks as they are")
    parser.add_argument("--out", type=Path, help="where _build goes (default: the book folder)")
    args = parser.parse_args(argv)
    try:
        html = build(args.book, args.out, not args.no_execute)
    except subprocess.CalledProcessError as exc:
        print(f"book build failed (exit {exc.returncode}); see the messages above",
              file=sys.stderr)
        return 1
    print(f"book written to {html / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
