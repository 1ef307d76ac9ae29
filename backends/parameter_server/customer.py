"""Customer: the bookkeeping of one app's outstanding requests (PS-Lite ``customer.cc``).

Every request an app sends gets a *timestamp*, and the customer remembers how many responses
it expects for it (one per server the request was sliced to). The receiving thread counts the
responses in; ``wait(ts)`` blocks the app until they are all there. In PS-Lite a customer owns
a queue and a thread that calls the app's handle; here the van's receiving thread calls it
directly, one thread switch fewer per message on a machine with few cores.

A wait never hangs: it fails with :class:`~backends.parameter_server.postoffice.NodeFailure`
when the van has seen a peer die, and when this node has received nothing at all for
``timeout_s`` seconds, naming the nodes whose responses are missing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from backends.parameter_server.message import Message

if TYPE_CHECKING:
    from backends.parameter_server.postoffice import Postoffice


@dataclass
class _Request:
    """One outstanding request: who must answer, who has."""

    recipients: list[int]
    answered: set[int] = field(default_factory=set)

    @property
    def done(self) -> bool:
        return len(self.answered) == len(self.recipients)


class Customer:
    """Tracks one app's requests by timestamp and hands its messages to ``handle``."""

    def __init__(self, app_id: int, postoffice: Postoffice,
                 handle: Callable[[Message], None]) -> None:
        self.app_id = app_id
        self.postoffice = postoffice
        self.handle = handle
        self._cond = threading.Condition()
        self._requests: dict[int, _Request] = {}
        self._next_ts = 0
        postoffice.van.add_customer(self)

    def new_request(self, recipients: list[int]) -> int:
        """Register a request sent to ``recipients`` (node ids); return its timestamp."""
        with self._cond:
            ts = self._next_ts
            self._next_ts += 1
            self._requests[ts] = _Request(list(recipients))
            return ts

    def accept(self, msg: Message) -> None:
        """Called by the receiving thread: let the app handle ``msg``, then count a response."""
        self.handle(msg)
        if not msg.meta.request:
            with self._cond:
                self._requests[msg.meta.timestamp].answered.add(msg.meta.sender)
                self._cond.notify_all()

    def wake(self) -> None:
        """Wake every waiter (the van calls this when it fails)."""
        with self._cond:
            self._cond.notify_all()

    def done(self, ts: int) -> bool:
        """Whether every response to request ``ts`` has arrived."""
        with self._cond:
            return self._requests[ts].done

    def wait(self, ts: int) -> None:
        """Block until request ``ts`` is answered by every recipient (then forget it)."""
        po = self.postoffice
        with self._cond:
            request = self._requests[ts]
            while not request.done:
                po.check_alive(lambda: self._missing(request, ts))
                self._cond.wait(timeout=0.1)
            del self._requests[ts]

    def _missing(self, request: _Request, ts: int) -> str:
        missing = [n for n in request.recipients if n not in request.answered]
        names = ", ".join(self.postoffice.describe(n) for n in missing)
        return f"waiting for the response to request {ts} from {names}"

    def __repr__(self) -> str:
        return f"Customer(app {self.app_id}, {len(self._requests)} outstanding)"
