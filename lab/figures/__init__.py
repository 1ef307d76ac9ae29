"""The textbook's figures, drawn from the simulator by one command.

``python -m lab.figures OUTDIR [--chapters 1,2]`` (``make figures``) writes one PNG per
figure, named ``chNN-what.png``, which the chapters place with MyST ``{figure}`` directives.
Every figure is computed from :mod:`simulator` on data-sheet clusters (the presets and the
textbook tier, no calibration, no measurement, fixed seeds), so the same command draws the
same bytes on any machine. One module per part of the book:

* :mod:`~lab.figures.foundations` — chapters 1 and 3;
* :mod:`~lab.figures.collectives` — chapter 2;
* :mod:`~lab.figures.scale` — chapter 2 at cluster scale (a 4,096-GPU fat tree);
* :mod:`~lab.figures.data_parallel` — chapters 4–7;
* :mod:`~lab.figures.pipeline` — chapters 8–11;
* :mod:`~lab.figures.model_parallel` — chapters 12–14;
* :mod:`~lab.figures.tensorflow` — chapters 15–16 (TensorFlow's runtime);
* :mod:`~lab.figures.strategies` — chapters 17–19 (distribution strategies);
* :mod:`~lab.figures.sharding` — chapters 20–21 (FSDP, context parallelism);
* :mod:`~lab.figures.experts` — chapters 22–23 (expert parallelism, zero-bubble pipelines);
* :mod:`~lab.figures.canvas` — saving, and the schedule chart they share.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from lab.figures import (
    collectives,
    data_parallel,
    experts,
    foundations,
    model_parallel,
    pipeline,
    scale,
    sharding,
    strategies,
    tensorflow,
)
from lab.figures.canvas import Registry, save

FIGURES: Registry = {**foundations.FIGURES, **collectives.FIGURES, **scale.FIGURES,
                     **data_parallel.FIGURES, **pipeline.FIGURES, **model_parallel.FIGURES,
           **tensorflow.FIGURES, **strategies.FIGURES, **sharding.FIGURES,
           **experts.FIGURES}
"""Every figure: file name stem → (chapter, drawing function)."""


def draw(outdir: str | Path, chapters: Collection[int] | None = None) -> list[Path]:
    """Draw the figures of ``chapters`` (all when ``None``) into ``outdir``; return the paths."""
    outdir = Path(outdir)
    return [save(fn(), outdir / f"{name}.png") for name, (chapter, fn) in FIGURES.items()
            if chapters is None or chapter in chapters]
