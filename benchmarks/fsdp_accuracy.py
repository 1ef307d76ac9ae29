"""FSDP (chapter 20): step time and peak memory over the model's size, predicted vs measured,
and our step's speed against PyTorch's ``fully_shard``.

    .venv/bin/python benchmarks/fsdp_accuracy.py [--worlds 2,4] [--quick | --points 512,1024]
        [--repeats 20] [--model textbook|host|both] [--runs 3] [--out benchmarks/results]

The registry's ``fsdp`` twin (:mod:`lab.strategies_fsdp`; a point is the MLP's hidden width)
through the shared runner (``_accuracy.py``): each run calibrates this machine afresh
(primitives only), then compares :class:`backends.fsdp.FSDP`'s training step with
:func:`simulator.fsdp.simulate_fsdp_step`'s prediction from one-process profiles, as
``distml-lab compare fsdp`` does. Each point also prints the peak bytes a rank holds,
predicted and measured, and the speed ratio (our median step ÷ ``fully_shard``'s). At the
end: the median over all rows of |peak error| and of the speed ratio, with min–max.

Writes ``fsdp_accuracy-<run id>.json``/``.csv`` (new files every run). Asserts nothing.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from _accuracy import main

from _output import RESULTS

TWINS = ["fsdp"]


def extras(row: dict[str, Any]) -> str:
    """Peak bytes measured and predicted, and the speed ratio against ``fully_shard``."""
    return (f"peak {row['measured_peak_bytes'] / 2**20:.3f} MiB (predicted "
            f"{row['predicted_peak_bytes'] / 2**20:.3f}, {row['rel_error_peak']:+.2%}); "
            f"ours / fully_shard {row['speed_ratio']:.2f} "
            f"({row['pytorch_median_s'] * 1e3:.3f} ms)")


def memory_and_speed(out: Path) -> None:
    """The medians of |peak error| and of the speed ratio over the newest results file."""
    newest = max(out.glob("fsdp_accuracy-*.json"), key=lambda p: p.stat().st_mtime)
    rows = json.loads(newest.read_text())["records"]
    for key, name, fn in (("rel_error_peak", "|peak error|", abs),
                          ("speed_ratio", "ours / fully_shard", float)):
        got = [fn(r[key]) for r in rows if r.get(key) is not None]
        if got:
            print(f"fsdp {name:<19} median {statistics.median(got):.3f} "
                  f"({min(got):.3f}–{max(got):.3f}) over {len(got)} rows")


if __name__ == "__main__":
    main(__doc__, "fsdp_accuracy", TWINS, extras)
    args = sys.argv[1:]
    memory_and_speed(Path(args[args.index("--out") + 1]) if "--out" in args else RESULTS)
