"""Tree all-reduces replayed rank by rank, without a SimPy process per rank (exact fast paths
of :mod:`simulator.collectives.fast`).

:func:`~simulator.collectives.all_reduce.trees_all_reduce` reduces ``n_t`` bytes up each tree
``t`` — a rank waits for its children's messages in rank order, reducing each (``g``), then
sends to its parent — and broadcasts them back down. Each rank's clock follows from its
children's (up) or its parent's (down) alone, so one pass up each tree and one down replays
it, ``O(p)`` in all, once each message's arrival is known from when it was sent.

**When an arrival is known.** A message that meets no other on a contended (``fifo``/``fair``)
channel arrives ``α + n/B`` after it is sent (:mod:`~simulator.collectives.fast_routes`).

* *One tree* (:func:`~simulator.collectives.all_reduce.binary_tree_all_reduce`): every up
  message has arrived before the root starts the broadcast, so the two phases never meet. Up,
  the only messages that may share a contended channel are the children's into their parent
  (the parent's receive port on a switch); down, the parent's to its children (its send
  port). :func:`tree_links` checks that no other two do, and where two siblings share a
  channel, replays the pair (:func:`_pair`): under ``fifo`` the first to reach the channel
  crosses it, then the other (at one instant the lower rank first, as the events post them);
  under ``fair`` both move at their max-min fair rates while both are in flight (Bertsekas &
  Gallager, *Data Networks*, §6.5.2), each at its own rate alone. A pair whose shared
  channels mix ``fifo`` and ``fair``, or three siblings on one channel, leave it to the events.
* *Two trees at once* (:func:`~simulator.collectives.all_reduce.double_binary_tree_all_reduce`):
  one tree's broadcast overlaps the other's reduction and a rank's two up messages leave
  together, so the replay is exact only where no contended channel carries two of the
  messages at all (in practice, links with contention ``none``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from simulator.collectives.exchange import buffer_nbytes, chunk_nbytes
from simulator.collectives.fast_routes import route_channels
from simulator.collectives.schedule import _children, binary_tree, double_binary_tree
from simulator.core.hardware import Cluster
from simulator.core.network import Channel

Parents = tuple[int | None, ...]


@dataclass
class TreeLinks:
    """α (s) and B (bytes/s) of every tree message, and the sibling pairs that share a
    contended channel.

    ``up[t]``: rank ``r``'s message to its parent in tree ``t``; ``down[t]``: its parent's
    message to ``r`` (NaN at the root). ``pairs[(t, phase, q)]``: how the two messages into
    (``"up"``) or out of (``"down"``) rank ``q`` share: ``("fifo", 0, 0)``, or ``("fair", R₁,
    R₂)`` with each one's rate while both are in flight (bytes/s), children in rank order."""

    up: list[tuple[np.ndarray, np.ndarray]]
    down: list[tuple[np.ndarray, np.ndarray]]
    pairs: dict[tuple[int, str, int], tuple[str, float, float]] = field(default_factory=dict)


def tree_links(cluster: Cluster, trees: Sequence[Parents]) -> TreeLinks | None:
    """The links of the trees' messages (each tree given by its parents), or ``None`` where the
    replay would not be exact: host effects, or two messages that may meet on a contended
    channel other than the sibling pairs one tree allows (see the module docstring)."""
    if not cluster.textbook_tier:
        return None
    topology, p, single = cluster.topology, cluster.world_size, len(trees) == 1
    owners: dict[str, dict[Channel, object]] = {"up": {}, "down": {}}
    contended: dict[tuple[int, str, int], list[Channel]] = {}
    links = TreeLinks([], [])
    for t, parents in enumerate(trees):
        for phase in ("up", "down"):
            latency, bandwidth = np.full(p, np.nan), np.full(p, np.nan)
            table = owners[phase] if single else owners["up"]
            for r, q in enumerate(parents):
                if q is None:
                    continue
                src, dst = (r, q) if phase == "up" else (q, r)
                channels = route_channels(topology, src, dst)
                path = [topology.link(c) for c in channels]
                latency[r] = sum(link.latency_s for link in path)
                bandwidth[r] = min((link.bandwidth_Bps for link in path), default=math.inf)
                busy = [c for c, link in zip(channels, path, strict=True)
                        if link.contention != "none"]
                owner = (q if single else (t, phase, r))
                for c in busy:
                    if table.setdefault(c, owner) != owner:
                        return None
                if busy:
                    contended[(t, phase, r)] = channels
            (links.up if phase == "up" else links.down).append((latency, bandwidth))
    if single and not _share(cluster, trees[0], contended, links):
        return None
    return links


def _share(cluster: Cluster, parents: Parents,
           contended: dict[tuple[int, str, int], list[Channel]], links: TreeLinks) -> bool:
    """Find the sibling pairs of one tree that share a contended channel, and how (into
    ``links.pairs``); ``False`` where three siblings share, or ``fifo`` and ``fair`` mix."""
    topology = cluster.topology
    for q, kids in _kids(parents).items():
        for phase in ("up", "down"):
            paths = [set(contended.get((0, phase, k), ())) for k in kids]
            shared = [{c for c in a & b if topology.link(c).contention != "none"}
                      for i, a in enumerate(paths) for b in paths[i + 1:]]
            if not any(shared):
                continue
            models = {topology.link(c).contention for c in shared[0]}
            if len(kids) != 2 or len(models) != 1:
                return False
            links.pairs[(0, phase, q)] = (("fifo", 0.0, 0.0) if models == {"fifo"} else
                                          ("fair", *_fair_rates(cluster, paths[0], paths[1],
                                                                         shared[0])))
    return True


def _fair_rates(cluster: Cluster, first: set[Channel], second: set[Channel],
                common: set[Channel]) -> tuple[float, float]:
    """Max-min fair rates (bytes/s) of two flows while both are in flight, sharing the
    ``fair`` channels ``common``: equal shares of the tightest of those, unless a flow is held
    lower by a channel of its own, when the other takes what that leaves."""
    def bandwidth(channels: set[Channel]) -> float:
        return min((cluster.topology.link(c).bandwidth_Bps for c in channels), default=math.inf)

    tightest = bandwidth(common)
    own = bandwidth(first - common), bandwidth(second - common)
    if min(own) < tightest / 2:
        low = 0 if own[0] <= own[1] else 1
        rates = [0.0, 0.0]
        rates[low] = own[low]
        rates[1 - low] = min(own[1 - low], tightest - own[low])
        return rates[0], rates[1]
    return tightest / 2, tightest / 2


def _pair(how: tuple[str, float, float], starts: list[float], nbytes: int,
          alone: list[float]) -> list[float]:
    """When two sibling messages that share a contended channel arrive, s: their bandwidth
    phases begin at ``starts`` (after α), each alone moves at ``alone`` bytes/s."""
    a, b = (0, 1) if starts[0] <= starts[1] else (1, 0)  # a reaches the channel first
    end = [0.0, 0.0]
    if how[0] == "fifo":  # one at a time, in the order they came
        end[a] = starts[a] + nbytes / alone[a]
        end[b] = max(starts[b], end[a]) + nbytes / alone[b]
        return end
    shared = how[1:]
    end[a] = starts[a] + nbytes / alone[a]
    if end[a] <= starts[b]:  # done before the other came
        end[b] = starts[b] + nbytes / alone[b]
        return end
    left_a = nbytes - alone[a] * (starts[b] - starts[a])
    done_a, done_b = starts[b] + left_a / shared[a], starts[b] + nbytes / shared[b]
    if done_a <= done_b:
        end[a] = done_a
        end[b] = done_a + (nbytes - shared[b] * (done_a - starts[b])) / alone[b]
    else:
        end[b] = done_b
        end[a] = done_b + (left_a - shared[a] * (done_b - starts[b])) / alone[a]
    return end


def _arrivals(links: TreeLinks, t: int, phase: str, q: int, kids: Sequence[int],
              sent: Sequence[float], nbytes: int) -> list[float]:
    """Arrival times (s) of the messages between ``q`` and its ``kids`` (``phase`` up: into
    ``q``; down: out of it), sent at ``sent``."""
    latency, bandwidth = (links.up if phase == "up" else links.down)[t]
    starts = [s + float(latency[k]) for s, k in zip(sent, kids, strict=True)]
    how = links.pairs.get((t, phase, q))
    if how is None or nbytes == 0:
        return [s + nbytes / float(bandwidth[k]) for s, k in zip(starts, kids, strict=True)]
    return _pair(how, starts, nbytes, [float(bandwidth[k]) for k in kids])


def _kids(parents: Parents) -> dict[int, tuple[int, ...]]:
    """Every rank's children in rank order (:func:`~simulator.collectives.schedule.children`'s
    table, looked up once, not once per rank: each lookup hashes all ``p`` parents)."""
    return _children(tuple(parents))


def _bottom_up(parents: Parents) -> list[int]:
    """The ranks of a tree, every child before its parent (deepest first)."""
    depth = [-1] * len(parents)
    for rank in range(len(parents)):
        chain, node = [], rank
        while depth[node] < 0 and (parent := parents[node]) is not None:
            chain.append(node)
            node = parent
        depth[node] = base = max(depth[node], 0)
        for i, child in enumerate(reversed(chain)):
            depth[child] = base + i + 1
    return sorted(range(len(parents)), key=lambda r: -depth[r])


def trees_all_reduce_fast(cluster: Cluster, trees: Sequence[tuple[int, Parents]],
                          links: TreeLinks) -> float:
    """Makespan of :func:`~simulator.collectives.all_reduce.trees_all_reduce` on ``cluster``
    (tree ``t`` carries ``n_t`` bytes), s, where :func:`tree_links` found ``links``."""
    p = cluster.world_size
    clock, finish = [0.0] * p, [0.0] * p
    delivered = [0.0] * p  # when a rank's last up message is in
    orders = [_bottom_up(parents) for _, parents in trees]
    kids = [_kids(parents) for _, parents in trees]
    for t, (n, _) in enumerate(trees):  # reduce up
        reduce_s = _reduce_s(cluster, n)
        for q in orders[t]:
            mine = kids[t].get(q)
            if mine:
                arrivals = _arrivals(links, t, "up", q, mine, [clock[k] for k in mine], n)
                now = clock[q]
                for k, arrived in zip(mine, arrivals, strict=True):
                    now = max(now, arrived) + reduce_s[q]
                    delivered[k] = max(delivered[k], arrived)
                clock[q] = now
    clock = [max(c, d) for c, d in zip(clock, delivered, strict=True)]  # ups delivered
    received = [0.0] * p
    for t, (n, parents) in enumerate(trees):  # broadcast down
        for q in reversed(orders[t]):
            if parents[q] is not None:
                clock[q] = max(clock[q], received[q])
            mine = kids[t].get(q)
            if mine:
                arrivals = _arrivals(links, t, "down", q, mine, [clock[q]] * len(mine), n)
                for k, arrived in zip(mine, arrivals, strict=True):
                    received[k] = arrived
                finish[q] = max(finish[q], *arrivals)
    return max(max(c, f) for c, f in zip(clock, finish, strict=True))


def _reduce_s(cluster: Cluster, nbytes: int) -> list[float]:
    """Each rank's time to reduce ``nbytes``, s (worked out once per distinct device)."""
    by_device: dict[object, float] = {}
    out = []
    for r, device in enumerate(cluster.devices):
        if device not in by_device:
            by_device[device] = cluster.reduce_s(r, nbytes)
        out.append(by_device[device])
    return out


def binary_tree_links(cluster: Cluster) -> TreeLinks | None:
    """:func:`tree_links` of NCCL's binary tree on ``cluster``."""
    return tree_links(cluster, [binary_tree(cluster.world_size)])


def double_binary_tree_links(cluster: Cluster) -> TreeLinks | None:
    """:func:`tree_links` of NCCL's two complementary trees on ``cluster``."""
    return tree_links(cluster, double_binary_tree(cluster.world_size))


def binary_tree_fast(cluster: Cluster, nbytes: int, itemsize: int = 4,
                     links: TreeLinks | None = None) -> float:
    """Makespan of :func:`~simulator.collectives.all_reduce.binary_tree_all_reduce`, s."""
    links = links if links is not None else binary_tree_links(cluster)
    if links is None:
        raise ValueError(f"the binary tree on {cluster.name} has no exact fast path")
    trees = [(buffer_nbytes(nbytes, itemsize), binary_tree(cluster.world_size))]
    return trees_all_reduce_fast(cluster, trees, links)


def double_binary_tree_fast(cluster: Cluster, nbytes: int, itemsize: int = 4,
                            links: TreeLinks | None = None) -> float:
    """Makespan of :func:`~simulator.collectives.all_reduce.double_binary_tree_all_reduce`,
    s: half the buffer up and down each tree."""
    links = links if links is not None else double_binary_tree_links(cluster)
    if links is None:
        raise ValueError(f"the double binary tree on {cluster.name} has no exact fast path")
    halves = chunk_nbytes(nbytes, 2, itemsize)
    trees = list(zip(halves, double_binary_tree(cluster.world_size), strict=True))
    return trees_all_reduce_fast(cluster, trees, links)
