"""Apps: SimpleApp, KVWorker and KVServer (PS-Lite ``simple_app.h``, ``kv_app.h``).

An *app* sends requests and handles what arrives for it; its :class:`Customer` counts the
responses. A **KVWorker** pushes and pulls (key, value) lists: a request is *sliced* by the
servers' key ranges (keys must be sorted) and each slice goes to the server owning it; ``pull``
fills the caller's tensor as the slices come back; ``wait(ts)`` blocks until every slice is
answered. A **KVServer** calls its *request handle* for each request and answers with
:meth:`KVServer.response`. :class:`KVStore` is the handle this lab trains with: weights of the
server's key range, a server-side update rule, and the three consistency models.

One extra request, ``clock``, carries SSP: the server answers it only once every worker has
pushed the asked number of iterations (``Meta.clock``), and every response carries the
server's slowest-worker clock, from which a worker reads the staleness of what it pulled.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from backends.parameter_server.customer import Customer
from backends.parameter_server.message import Message, Meta
from backends.parameter_server.postoffice import Postoffice
from backends.parameter_server.updaters import UpdateRule
from simulator.parameter_server import slice_bounds


class SimpleApp:
    """An app: a customer, requests out, a handle for what comes in."""

    def __init__(self, app_id: int, postoffice: Postoffice) -> None:
        self.postoffice = postoffice
        self.customer = Customer(app_id, postoffice, self._process)
        self.request_handle: Callable[[Message, SimpleApp], None] = lambda msg, app: None
        self.response_handle: Callable[[Message, SimpleApp], None] = lambda msg, app: None

    def _process(self, msg: Message) -> None:
        if msg.meta.request:
            self.request_handle(msg, self)
        else:
            self.response_handle(msg, self)

    def request(self, recipients: list[int], vals: torch.Tensor | None = None) -> int:
        """Send a request (optional values) to each node of ``recipients``; return its ts."""
        ts = self.customer.new_request(recipients)
        for node in recipients:
            self.postoffice.van.send(Message(
                Meta(recipient=node, timestamp=ts, app_id=self.customer.app_id),
                vals=vals if vals is not None else torch.empty(0)))
        return ts

    def response(self, req: Message, vals: torch.Tensor | None = None, clock: int = -1) -> None:
        """Answer request ``req`` (optional values; ``clock`` for KV responses)."""
        m = req.meta
        self.postoffice.van.send(Message(
            Meta(recipient=m.sender, timestamp=m.timestamp, app_id=m.app_id, request=0,
                 push=m.push, pull=m.pull, clock=clock),
            vals=vals if vals is not None else torch.empty(0)))

    def wait(self, ts: int) -> None:
        """Block until request ``ts`` is answered."""
        self.customer.wait(ts)


class KVWorker(SimpleApp):
    """Pushes and pulls slices of the key space (PS-Lite ``KVWorker``: ``ZPush``/``ZPull``)."""

    def __init__(self, app_id: int, postoffice: Postoffice) -> None:
        super().__init__(app_id, postoffice)
        self.response_handle = self._on_response
        self._pulls: dict[int, tuple[torch.Tensor, dict[int, int]]] = {}
        self._clocks: dict[int, int] = {}
        self.servers = postoffice.server_ids

    def push(self, keys: torch.Tensor, vals: torch.Tensor, clock: int = -1) -> int:
        """Push ``vals`` (one float32 per key) for sorted ``keys``; ``clock``: the iteration
        (then every server gets the push, an empty one if it owns none of the keys)."""
        return self._send(keys, vals, None, push=True, clock=clock)

    def pull(self, keys: torch.Tensor, out: torch.Tensor) -> int:
        """Pull the values of sorted ``keys`` into ``out`` (filled by the time ``wait`` returns)."""
        return self._send(keys, None, out, push=False, clock=-1)

    def push_pull(self, keys: torch.Tensor, vals: torch.Tensor, out: torch.Tensor,
                  clock: int = -1) -> int:
        """Push, then pull the updated values, in one round trip per server."""
        return self._send(keys, vals, out, push=True, clock=clock)

    def clock(self, clock: int) -> int:
        """Ask every server to answer once every worker has pushed ``clock`` iterations."""
        ts = self.customer.new_request(self.servers)
        for node in self.servers:
            self.postoffice.van.send(Message(Meta(recipient=node, timestamp=ts,
                                                  app_id=self.customer.app_id, clock=clock)))
        return ts

    def wait(self, ts: int) -> int:  # type: ignore[override]
        """Block until request ``ts`` is answered; return the slowest server clock it saw."""
        self.customer.wait(ts)
        self._pulls.pop(ts, None)
        return self._clocks.pop(ts, -1)

    def _send(self, keys: torch.Tensor, vals: torch.Tensor | None, out: torch.Tensor | None,
              push: bool, clock: int) -> int:
        bounds = slice_bounds(keys.numpy(), self.postoffice.ranges)
        recipients = [node for node, (lo, hi) in zip(self.servers, bounds, strict=True)
                      if hi > lo or (push and clock >= 0)]
        ts = self.customer.new_request(recipients)
        if out is not None:
            self._pulls[ts] = (out, {node: lo for node, (lo, _) in zip(self.servers, bounds,
                                                                        strict=True)})
        for node, (lo, hi) in zip(self.servers, bounds, strict=True):
            if node in recipients:
                self.postoffice.van.send(Message(
                    Meta(recipient=node, timestamp=ts, app_id=self.customer.app_id,
                         push=int(push), pull=int(out is not None), clock=clock),
                    keys=keys[lo:hi], vals=vals[lo:hi] if vals is not None else torch.empty(0)))
        return ts

    def _on_response(self, msg: Message, app: SimpleApp) -> None:
        m = msg.meta
        if m.pull and m.nvals:
            out, offsets = self._pulls[m.timestamp]
            lo = offsets[m.sender]
            out[lo:lo + m.nvals] = msg.vals
        if m.clock >= 0:
            seen = self._clocks.get(m.timestamp)
            self._clocks[m.timestamp] = m.clock if seen is None else min(seen, m.clock)


class KVServer(SimpleApp):
    """Answers the workers' requests with a request handle (PS-Lite ``KVServer``)."""

    def __init__(self, app_id: int, postoffice: Postoffice,
                 handle: Callable[[Message, KVServer], None]) -> None:
        super().__init__(app_id, postoffice)
        self.begin, self.end = postoffice.ranges[postoffice.my_rank]
        self.request_handle = handle  # type: ignore[assignment]


class KVStore:
    """The request handle of a training server: weights, an update rule, a consistency model.

    * **bsp** — pushes of one iteration are summed; when all ``W`` have arrived the rule is
      applied once and every push is answered (so no worker pulls before the update);
    * **ssp** and **async** — each push is applied on arrival and answered at once; a worker's
      clock is the iterations it has pushed; a ``clock`` request waits for the slowest one.
    """

    def __init__(self, weights: torch.Tensor, begin: int, rule: UpdateRule, model: str,
                 num_workers: int, worker_ids: list[int]) -> None:
        self.weights, self.begin, self.rule, self.model = weights, begin, rule, model
        self.num_workers = num_workers
        self.worker_clock = dict.fromkeys(worker_ids, 0)
        self.applied = 0  # BSP: iterations applied
        self._sum = torch.zeros_like(weights)
        self._touched = torch.zeros(weights.numel(), dtype=torch.bool)
        self._pushes: list[Message] = []
        self._clock_waits: list[Message] = []

    @property
    def min_clock(self) -> int:
        """Iterations every worker has pushed (BSP: applied)."""
        return self.applied if self.model == "bsp" else min(self.worker_clock.values())

    def __call__(self, msg: Message, server: KVServer) -> None:
        m = msg.meta
        idx = msg.keys - self.begin
        if not m.push and not m.pull:  # a clock request
            self._clock_waits.append(msg)
        elif m.push and self.model == "bsp":
            self._sum.index_add_(0, idx, msg.vals)
            self._touched[idx] = True
            self._pushes.append(msg)
            if len(self._pushes) == self.num_workers:
                touched = self._touched.nonzero().flatten()
                self.rule(self.weights, touched, self._sum[touched])
                self._sum[touched] = 0
                self._touched[touched] = False
                self.applied += 1
                for push in self._pushes:
                    self._answer(push, server)
                self._pushes.clear()
        else:
            if m.push:
                self.rule(self.weights, idx, msg.vals)
                if m.clock >= 0:
                    self.worker_clock[m.sender] = max(self.worker_clock[m.sender], m.clock + 1)
            self._answer(msg, server)
        if self._clock_waits:
            ready = [w for w in self._clock_waits if w.meta.clock <= self.min_clock]
            self._clock_waits = [w for w in self._clock_waits if w.meta.clock > self.min_clock]
            for w in ready:
                server.response(w, clock=self.min_clock)

    def _answer(self, msg: Message, server: KVServer) -> None:
        vals = self.weights[msg.keys - self.begin] if msg.meta.pull else None
        server.response(msg, vals, clock=self.min_clock)

    def waiting_on(self, describe: Callable[[int], str]) -> str:
        """What this server is still waiting for, in words (for error messages)."""
        if self._pushes:
            have = {p.meta.sender for p in self._pushes}
            missing = [describe(n) for n in self.worker_clock if n not in have]
            return f"pushes of iteration {self.applied} missing from {', '.join(missing)}"
        if self._clock_waits:
            lagging = [describe(n) for n, c in self.worker_clock.items() if c < self.min_clock + 1]
            return f"clock {self._clock_waits[0].meta.clock} waits for {', '.join(lagging)}"
        return ""
