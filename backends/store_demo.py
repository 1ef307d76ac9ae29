"""Rendezvous and process groups, shown: what every rank sees (book ch. 5).

Before ranks can all-reduce they must *find each other*. PyTorch does it with a **Store**, a
small key-value service every rank can reach; ``TCPStore`` is one server (on rank 0, or here the
launcher) and a client per rank. ``init_process_group`` writes each rank's address into it
and waits until all have arrived; after that the store is a place to agree on little things
(who leads, how many have arrived) without a collective. A **process group** is a set of ranks
with its own communicator; ``dist.new_group(ranks)`` and ``dist.new_subgroups(size)`` cut the
world into smaller groups — DDP's data-parallel groups in 3D parallelism are such groups.
A store answers whoever reaches its port, without a password, so the lab's stores listen on
loopback only (:mod:`backends.rendezvous`).

:func:`store_demo` (one rank's part) walks through the store's calls:

1. ``set`` / ``get`` — rank 0 publishes a value; ``get`` on every other rank *blocks* until it
   is there (up to the store's timeout);
2. ``add`` — an atomic counter: each rank adds 1 and gets the count at that moment (an
   arrival order), then ``wait`` for every rank's ``ready/r`` key and read the total;
3. ``compare_set`` — leader election: every rank proposes itself for an empty key, the first
   write wins, and all read the same winner;
4. a key that never arrives — ``get`` fails after a short timeout with a clear message
   (:func:`get_or_timeout`).

:func:`groups_demo` builds ``dist.new_group`` (the even ranks) and ``dist.new_subgroups``
(pairs; by enumeration when the world is odd) and all-reduces each rank's number inside them.
Run it::

    python -m backends.store_demo --world 4
    distml-lab store-demo --world 3 --json
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

from backends.launch import spawn
from backends.rendezvous import group_store


class StoreTimeout(TimeoutError):
    """A key did not arrive in the store in time."""


def get_or_timeout(store: Any, key: str, timeout_s: float) -> bytes:
    """``store.get(key)``, but a key missing after ``timeout_s`` raises :class:`StoreTimeout`
    naming the key (the store's own timeout is restored afterwards)."""
    saved = store.timeout
    store.set_timeout(datetime.timedelta(seconds=timeout_s))
    try:
        return bytes(store.get(key))
    except dist.DistStoreError as exc:
        raise StoreTimeout(f"key {key!r} did not arrive in the store within {timeout_s:g} s "
                           f"(is the rank that sets it alive?)") from exc
    finally:
        store.set_timeout(saved)


def store_demo(timeout_s: float = 10.0, missing_timeout_s: float = 0.5) -> dict[str, Any]:
    """One rank's walk through a TCPStore (call on every rank); returns what it saw."""
    rank, world = dist.get_rank(), dist.get_world_size()
    # a fresh store: rank 0 serves it on loopback (or MASTER_ADDR), the port goes over the group
    store = group_store(timeout_s)
    seen: dict[str, Any] = {"rank": rank}
    if rank == 0:  # 1. set / get: get blocks until the key exists
        store.set("config/lr", "0.1")
    seen["config/lr"] = store.get("config/lr").decode()
    seen["arrival"] = store.add("arrived", 1)  # 2. an atomic counter: my arrival order
    store.set(f"ready/{rank}", "1")
    store.wait([f"ready/{r}" for r in range(world)])
    seen["arrived"] = store.add("arrived", 0)  # everyone is in: the total
    proposal = store.compare_set("leader", "", str(rank))  # 3. the first write wins
    seen["proposal_result"] = proposal.decode()
    dist.barrier()
    seen["leader"] = store.get("leader").decode()
    start = time.perf_counter()  # 4. a key nobody sets
    try:
        get_or_timeout(store, f"never/{rank}", missing_timeout_s)
        seen["missing"] = "arrived?!"
    except StoreTimeout as exc:
        seen["missing"] = str(exc)
    seen["missing_waited_s"] = time.perf_counter() - start
    dist.barrier()  # rank 0 serves the store: it must outlive every client's last call
    return seen


def groups_demo() -> dict[str, Any]:
    """One rank's view of a ``new_group`` and of ``new_subgroups`` (call on every rank)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    seen: dict[str, Any] = {"rank": rank}
    evens = [r for r in range(world) if r % 2 == 0]
    even_group = dist.new_group(evens)  # every rank must call new_group, members or not
    seen["even_group_rank"] = dist.get_rank(even_group)  # -1 outside the group
    if rank in evens:
        x = torch.tensor([float(rank)])
        dist.all_reduce(x, group=even_group)
        seen["even_sum"] = x.item()
    if world % 2 == 0:
        sub, _ = dist.new_subgroups(group_size=2)  # type: ignore[no-untyped-call]
        seen["subgroups_by"] = "new_subgroups(group_size=2)"
    else:
        pairs = [list(range(r, min(r + 2, world))) for r in range(0, world, 2)]
        sub, _ = dist.new_subgroups_by_enumeration(pairs)  # type: ignore[no-untyped-call]
        seen["subgroups_by"] = f"new_subgroups_by_enumeration({pairs})"
    seen["subgroup_ranks"] = dist.get_process_group_ranks(sub)
    seen["subgroup_rank"] = dist.get_rank(sub)
    x = torch.tensor([float(rank)])
    dist.all_reduce(x, group=sub)
    seen["subgroup_sum"] = x.item()
    return seen


def rendezvous_demo(timeout_s: float = 10.0, missing_timeout_s: float = 0.5) -> dict[str, Any]:
    """Both demos on one rank."""
    return {"store": store_demo(timeout_s, missing_timeout_s), "groups": groups_demo()}


def run(world: int, missing_timeout_s: float = 0.5, timeout_s: float = 20.0
        ) -> list[dict[str, Any]]:
    """Launch ``world`` ranks and return what each one saw."""
    if not 1 <= world <= 16:
        raise ValueError(f"the store demo runs 1 to 16 ranks on this machine, got {world}")
    if not 0 < missing_timeout_s <= 30:
        raise ValueError(f"the missing key's timeout must be in (0, 30] s, got "
                         f"{missing_timeout_s}")
    quiet = {"TORCH_CPP_LOG_LEVEL": "ERROR"}  # the timed-out get is expected: no c10d warning
    return spawn(rendezvous_demo, world, timeout_s, missing_timeout_s, timeout=timeout_s,
                 deadline=60 + 2 * timeout_s, env=quiet)


def format_report(seen: Sequence[dict[str, Any]]) -> str:
    """What each rank saw, one line per rank and demo."""
    lines = []
    for s in seen:
        st, g = s["store"], s["groups"]
        lines.append(f"rank {st['rank']}: get config/lr -> {st['config/lr']}; add -> arrival "
                     f"{st['arrival']}, total {st['arrived']}; compare_set -> "
                     f"{st['proposal_result']}, leader {st['leader']}; missing key -> "
                     f"{st['missing']}")
    for s in seen:
        g = s["groups"]
        even = (f"even group rank {g['even_group_rank']}, sum {g['even_sum']:g}"
                if "even_sum" in g else "not in the even group (rank -1)")
        lines.append(f"rank {g['rank']}: {even}; subgroup {g['subgroup_ranks']} "
                     f"(rank {g['subgroup_rank']} in it), sum {g['subgroup_sum']:g}")
    if seen:
        lines.append(f"subgroups built with {seen[0]['groups']['subgroups_by']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m backends.store_demo [--world N] [--missing-timeout S] [--json]``."""
    parser = argparse.ArgumentParser(prog="python -m backends.store_demo",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--world", type=int, default=4, help="ranks (1-16, default 4)")
    parser.add_argument("--missing-timeout", type=float, default=0.5,
                        help="seconds to wait for the key nobody sets (default 0.5)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    try:
        seen = run(args.world, args.missing_timeout)
    except ValueError as exc:
        print(f"store_demo: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"ranks": seen}, indent=2) if args.json else format_report(seen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
