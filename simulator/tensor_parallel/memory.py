"""Bytes per GPU of each pipeline stage: model states (mixed-precision Adam) and the
activations the schedule keeps in flight — and whether a configuration fits."""

from __future__ import annotations

from collections.abc import Sequence

from simulator.pipeline.schedules import Action, in_flight
from simulator.tensor_parallel.chunks import Chunk
from simulator.tensor_parallel.config import MegatronConfig
from simulator.tensor_parallel.stages import chunks
from simulator.zero import bytes_per_parameter


def memory_per_stage(config: MegatronConfig, parts: Sequence[Chunk]) -> list[dict[str, float]]:
    """Bytes per GPU of each pipeline stage: model states (mixed-precision Adam, ZeRO's
    ``2 + 2 + 12`` bytes per parameter) and activations (what the schedule keeps in flight,
    :func:`~simulator.pipeline.schedules.in_flight` per chunk, plus the recomputed layer).
    With ``fsdp`` the states are sharded (:func:`stored_parameters`)."""
    g = config.grid
    states = bytes_per_parameter("mixed", "adam")
    schedule = config.schedule()
    out = []
    for r in range(g.p):
        mine = [parts[c * g.p + r] for c in range(config.interleave)]
        params = stored_parameters(config, mine)
        acts = _peak_stash(schedule[r], mine) + max(c.transient_bytes for c in mine)
        row = {"parameters": float(states.parameter * params),
               "gradients": float(states.gradient * params),
               "optimizer_state": float(states.optimizer * params),
               "activations": float(acts)}
        row["total"] = sum(row.values())
        out.append(row)
    return out


def stored_parameters(config: MegatronConfig, mine: Sequence[Chunk]) -> float:
    """Parameters whose states a rank stores for its chunks ``mine``: all it computes with, or
    with ``fsdp`` (ZeRO-3) the dense ones ÷ ``d·cp`` and the experts' ÷ ``d·cp/ep``, the sizes
    of the groups that hold the same weights (Rajbhandari et al. 2020, §5.3: ``16Ψ/N_d``
    bytes of model states)."""
    params = sum(c.parameters for c in mine)
    if not config.fsdp:
        return float(params)
    g = config.grid
    experts = sum(c.expert_parameters for c in mine)
    return (params - experts) / (g.d * g.cp) + experts * g.ep / (g.d * g.cp)


def _peak_stash(actions: Sequence[Action], mine: Sequence[Chunk]) -> float:
    """The most activation bytes a rank's schedule keeps at once."""
    if len({c.stash_bytes for c in mine}) == 1:
        return in_flight(actions) * mine[0].stash_bytes
    live, most = 0.0, 0.0
    for a in actions:
        live += mine[a.chunk].stash_bytes if a.kind == "F" else -mine[a.chunk].stash_bytes
        most = max(most, live)
    return most


def fits(config: MegatronConfig, flops_per_s: float, memory_bytes: float) -> bool:
    """Whether every GPU's model states and activations fit in ``memory_bytes``."""
    parts = chunks(config, flops_per_s)
    return max(m["total"] for m in memory_per_stage(config, parts)) <= memory_bytes
