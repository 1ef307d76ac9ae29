"""Tests of benchmarks/: the scripts' results go through benchmarks/_output.py."""

from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
"""The scripts' folder: first on ``sys.path`` when a script runs as ``python benchmarks/x.py``."""
