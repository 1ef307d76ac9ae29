"""One step of a rank's schedule, and a schedule: per rank, its actions in execution order.

An :class:`Action` is ``F`` (forward) or ``B`` (backward) of one micro-batch on one model
chunk. No torch and no time in it: both twins read the same lists.
"""

from __future__ import annotations

from dataclasses import dataclass

Schedule = list[list["Action"]]
"""Per rank, its actions in execution order."""


@dataclass(frozen=True)
class Action:
    """One step of a rank's schedule.

    Attributes:
        kind: ``"F"`` (forward) or ``"B"`` (backward).
        microbatch: the micro-batch index, 0-based.
        chunk: the model chunk (virtual stage) on this rank, 0 unless interleaved.
    """

    kind: str
    microbatch: int
    chunk: int = 0

    def __str__(self) -> str:
        return f"{self.kind}{self.microbatch}" + (f".{self.chunk}" if self.chunk else "")


def _check(stages: int, microbatches: int) -> None:
    if stages < 1:
        raise ValueError(f"a pipeline needs at least 1 stage, got {stages}")
    if microbatches < 1:
        raise ValueError(f"a pipeline needs at least 1 micro-batch, got {microbatches}")
