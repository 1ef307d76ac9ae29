"""Chapter 18, reference answer: a global batch cut over replicas and workers (exercise in
``exercises/ch18_split_batch.py``; the lab's own is
:func:`simulator.tf_distribute.mirrored.replica_rows`)."""

from __future__ import annotations


def replica_rows(batch: int, replicas: int) -> list[int]:
    """``⌈n/k⌉`` rows per slice until they run out, then empty slices."""
    if batch < 1 or replicas < 1:
        raise ValueError(f"cannot cut {batch} rows over {replicas} replicas")
    size = -(-batch // replicas)
    return [max(0, min(size, batch - i * size)) for i in range(replicas)]


def worker_slices(batch: int, workers: int, local: int, worker: int) -> list[tuple[int, int]]:
    """The global cut over ``workers · local`` replicas; worker ``w`` keeps its ``local``."""
    if workers < 1 or local < 1 or not 0 <= worker < workers:
        raise ValueError(f"worker {worker} of {workers}, {local} local replicas")
    ranges, start = [], 0
    for rows in replica_rows(batch, workers * local):
        ranges.append((start, start + rows))
        start += rows
    return ranges[worker * local:(worker + 1) * local]
