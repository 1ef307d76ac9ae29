"""The per-layer profile of a setup's model, on ONE process, at the micro-batch size.

:func:`profile` measures each layer's forward and backward alone
(:func:`backends.pipeline.profiler.profile_layers`); :func:`profile_colocated` takes the
same profile while one copy per stage runs at once (shared caches and memory bandwidth);
:func:`profile_quietly` also reports how busy other programs kept the host.

Units: seconds, bytes.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, replace
from typing import Any

from lab.pipeline.experiment import PipelineSetup
from lab.pipeline.host_load import host_cores, quietly
from simulator.pipeline.profile import LayerProfile


def profile(setup: PipelineSetup, repeats: int = 10) -> list[LayerProfile]:
    """Per-layer profile of ``setup``'s model at its micro-batch size, on this one process,
    single-threaded like a rank (``OMP_NUM_THREADS=1``)."""
    import torch

    from backends.pipeline.microbatch import split
    from backends.pipeline.profiler import profile_layers

    model, x, _ = setup.build()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return profile_layers(model, split(x, setup.microbatches)[0], repeats=repeats)
    finally:
        torch.set_num_threads(threads)


def profile_rank(setup_fields: dict[str, Any], repeats: int) -> list[LayerProfile]:
    """Rank function: :func:`profile` in every rank at once (see :func:`profile_colocated`)."""
    return profile(PipelineSetup(**setup_fields), repeats)


def profile_colocated(setup: PipelineSetup, repeats: int = 10,
                      processes: int | None = None) -> list[LayerProfile]:
    """The one-process profile, taken while ``processes`` copies of it run at once (default:
    as many as the pipeline's stages, at most the host's cores).

    Each copy still measures its layers on one process and one core; running them together
    only reproduces what a pipeline's stage processes share besides cores — the last-level
    cache and the memory bandwidth — as calibration measures compute rates with every rank
    running. Oversubscribed *cores* are not in it: the simulator shares them
    (``cores=``). Returns the per-layer median over the copies.
    """
    from backends.launch import spawn

    k = processes or max(1, min(setup.stages, host_cores()))
    if k == 1:
        return profile(setup, repeats)
    copies: list[list[LayerProfile]] = spawn(profile_rank, k, asdict(setup), repeats)
    return [replace(layers[0],
                    forward_s=statistics.median(x.forward_s for x in layers),
                    backward_s=statistics.median(x.backward_s for x in layers))
            for layers in zip(*copies, strict=True)]


def profile_quietly(setup: PipelineSetup, repeats: int = 10, colocated: bool = False
                    ) -> tuple[list[LayerProfile], float]:
    """:func:`profile` (or :func:`profile_colocated`), and the share of the host's CPU other
    programs used meanwhile (:func:`quietly`)."""
    return quietly(profile_colocated if colocated else profile, setup, repeats)
