"""Draw the textbook's figures: ``python -m lab.figures textbook/figures [--chapters 1,2]``."""

from __future__ import annotations

import argparse
import sys
import time

import matplotlib

matplotlib.use("Agg")

from lab.figures import draw


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, draw, and print one line per figure."""
    parser = argparse.ArgumentParser(prog="python -m lab.figures", description=__doc__)
    parser.add_argument("outdir", help="folder for the PNG files (created if missing)")
    parser.add_argument("--chapters", help="comma-separated chapter numbers (default: all)")
    args = parser.parse_args(argv)
    try:
        chapters = ({int(c) for c in args.chapters.split(",")} if args.chapters else None)
    except ValueError:
        parser.exit(2, f"--chapters takes numbers like 1,2; got {args.chapters!r}\n")
    start = time.perf_counter()
    paths = draw(args.outdir, chapters)
    for path in paths:
        print(path)
    print(f"{len(paths)} figures in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
