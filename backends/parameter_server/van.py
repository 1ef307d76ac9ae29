"""Van: the transport — messages over ``torch.distributed`` point-to-point (PS-Lite ``van.cc``).

PS-Lite's van owns the sockets (ZeroMQ): ``Send`` writes a message, and a *receiving thread*
loops ``RecvMsg`` → dispatch: control messages (registration, barrier, terminate) to the
postoffice, data messages to the customer of their app. Ours does the same over a process
group of its own (``dist.new_group``), with gloo:

* a message is a fixed-size header, then its payloads (:mod:`.message`); the header goes on
  tag :data:`HEADER_TAG` and is received *from any source*; the payloads follow on
  :data:`PAYLOAD_TAG` and are received from the header's sender. Messages between two nodes on
  one tag never overtake each other, so a header's payloads are the next ones from its sender;
* one thread receives (the receiving thread); any thread may send, one message at a time (a
  lock keeps a header and its payloads together);
* when a peer dies its connection closes and the receive fails: the van records why, wakes
  every waiter, and the waits raise :class:`~.postoffice.NodeFailure` naming the dead node.

The group's own timeout is long (a scheduler legitimately hears nothing for a whole run);
waits bound silence themselves (:meth:`.Postoffice.check_alive`).

The van is CPU-side by nature, as PS-Lite's sockets are: receives from any source and tags are
gloo's, which NCCL has neither of, so every tensor that crosses it — keys, values, headers —
and the servers' store behind it live in host memory, whatever device
:func:`backends.device.device` gives the other twins.
"""

from __future__ import annotations

import datetime
import threading
import time
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from backends.parameter_server.message import Command, Message, Meta
from simulator.parameter_server import HEADER_FIELDS

if TYPE_CHECKING:
    from backends.parameter_server.customer import Customer
    from backends.parameter_server.postoffice import Postoffice

HEADER_TAG = 11
PAYLOAD_TAG = 12
GROUP_TIMEOUT = datetime.timedelta(hours=1)


class Van:
    """Sends and receives :class:`Message` s for one node."""

    def __init__(self, postoffice: Postoffice) -> None:
        self.postoffice = postoffice
        self.my_node = dist.get_rank()
        self.group = dist.new_group(list(range(dist.get_world_size())), timeout=GROUP_TIMEOUT)
        self._send_lock = threading.Lock()
        self._customers: dict[int, Customer] = {}
        self._thread: threading.Thread | None = None
        self.error: str | None = None
        self.last_received = time.monotonic()
        self.bytes_sent = 0
        self.messages_sent = 0

    def add_customer(self, customer: Customer) -> None:
        """Dispatch data messages of ``customer.app_id`` to ``customer``."""
        self._customers[customer.app_id] = customer

    def start(self) -> None:
        """Start the receiving thread; silence counts from now."""
        self.last_received = time.monotonic()
        self._thread = threading.Thread(target=self._receiving, name="van-receiving",
                                        daemon=True)
        self._thread.start()

    def join(self, timeout_s: float) -> None:
        """Wait for the receiving thread to end (after a TERMINATE)."""
        if self._thread is not None:
            self._thread.join(timeout_s)

    def send(self, msg: Message) -> int:
        """Send ``msg`` to ``msg.meta.recipient``; return the bytes sent (header included)."""
        msg.meta.sender = self.my_node
        msg.seal()
        m = msg.meta
        header = m.pack()
        nbytes = header.numel() * 8
        with self._send_lock:
            try:
                dist.send(header, m.recipient, group=self.group, tag=HEADER_TAG)
                if m.nkeys and not m.keys_range:
                    dist.send(msg.keys, m.recipient, group=self.group, tag=PAYLOAD_TAG)
                    nbytes += 8 * m.nkeys
                if m.nvals:
                    dist.send(msg.vals, m.recipient, group=self.group, tag=PAYLOAD_TAG)
                    nbytes += 4 * m.nvals
            except RuntimeError as exc:  # the recipient is gone: say who
                self.error = self.error or f"{type(exc).__name__}: {exc}"
                whom = self.postoffice.describe(m.recipient)
                self.postoffice.check_alive(lambda: f"sending to {whom}")
                raise
            self.bytes_sent += nbytes
            self.messages_sent += 1
        return nbytes

    def _recv(self) -> Message:
        header = torch.empty(HEADER_FIELDS, dtype=torch.int64)
        src = dist.recv(header, group=self.group, tag=HEADER_TAG)
        meta = Meta.unpack(header)
        msg = Message(meta)
        if meta.nkeys and not meta.keys_range:
            msg.keys = torch.empty(meta.nkeys, dtype=torch.int64)
            dist.recv(msg.keys, src, group=self.group, tag=PAYLOAD_TAG)
        elif meta.nkeys:
            msg.keys = torch.arange(meta.key_begin, meta.key_end, dtype=torch.int64)
        if meta.nvals:
            msg.vals = torch.empty(meta.nvals, dtype=torch.float32)
            dist.recv(msg.vals, src, group=self.group, tag=PAYLOAD_TAG)
        return msg

    def _receiving(self) -> None:
        """The receiving thread: receive, dispatch, until TERMINATE or a failure."""
        try:
            while True:
                msg = self._recv()
                self.last_received = time.monotonic()
                if msg.meta.command == Command.DATA:
                    self._customers[msg.meta.app_id].accept(msg)
                elif self.postoffice.on_control(msg):
                    return  # TERMINATE
        except BaseException as exc:  # a peer died, or a handler failed: tell every waiter
            self.error = f"{type(exc).__name__}: {exc}"
            self.postoffice.wake_all()
            for customer in self._customers.values():
                customer.wake()
