"""Roles and key ranges: one scheduler, ``S`` servers, ``W`` workers, each server a key range.

PS-Lite's ``Postoffice`` (Li et al., OSDI 2014): rank 0 is the scheduler, ranks ``1 … S`` the
servers, ranks ``S+1 … S+W`` the workers, and the key space ``0 … K−1`` is split into one
contiguous range per server (:func:`key_ranges`, :func:`skewed_splits`). A worker cuts its
sorted keys by those ranges (:func:`slice_bounds`), one slice per server. The real twin
(:mod:`backends.parameter_server.postoffice`, ``KVWorker``) checks its layout and splits its keys
with these same functions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class PSConfigError(ValueError):
    """A parameter-server configuration that cannot work (the message says why)."""


def check_layout(servers: int, workers: int, world: int | None = None) -> None:
    """One scheduler, at least one server and one worker, and a world of ``1 + S + W``."""
    if servers < 1:
        raise PSConfigError(f"a parameter server needs at least 1 server, got {servers}")
    if workers < 1:
        raise PSConfigError(f"a parameter server needs at least 1 worker, got {workers}")
    if world is not None and world != 1 + servers + workers:
        raise PSConfigError(f"{servers} servers and {workers} workers need a world of "
                            f"{1 + servers + workers} ranks (1 scheduler), got {world}")


def key_ranges(num_keys: int, servers: int,
               splits: Sequence[int] | None = None) -> list[tuple[int, int]]:
    """Server ``s`` owns keys ``begin_s … end_s − 1`` (PS-Lite ``GetServerKeyRanges``).

    ``splits`` gives each server's first key (``splits[0] == 0``, increasing); by default the
    ranges are as equal as possible, the first ``num_keys mod S`` one key longer.
    """
    if servers < 1:
        raise PSConfigError(f"a parameter server needs at least 1 server, got {servers}")
    if num_keys < servers:
        raise PSConfigError(f"more servers ({servers}) than keys ({num_keys}): some server "
                            "would own no key")
    if splits is None:
        base, extra = divmod(num_keys, servers)
        splits = [s * base + min(s, extra) for s in range(servers)]
    starts = list(splits)
    if len(starts) != servers or starts[0] != 0 or any(
            b <= a for a, b in zip(starts, [*starts[1:], num_keys], strict=True)):
        raise PSConfigError(f"key splits {starts} must be {servers} increasing starts from 0, "
                            f"each below the next and below {num_keys} keys")
    return list(zip(starts, [*starts[1:], num_keys], strict=True))


def skewed_splits(num_keys: int, servers: int, hot_share: float) -> list[int]:
    """Splits giving server 0 a share ``hot_share`` of the keys, the others equal parts."""
    if servers == 1:
        return [0]
    if not 0 < hot_share < 1:
        raise PSConfigError(f"the hot server's share must be in (0, 1), got {hot_share}")
    hot = max(1, min(num_keys - servers + 1, round(hot_share * num_keys)))
    rest = key_ranges(num_keys - hot, servers - 1)
    return [0] + [hot + b for b, _ in rest]


def slice_bounds(keys: np.ndarray, ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Positions ``[lo, hi)`` of each server's keys in a sorted key array."""
    starts = np.searchsorted(keys, [b for b, _ in ranges])
    ends = [*starts[1:].tolist(), len(keys)]
    return list(zip(starts.tolist(), ends, strict=True))
