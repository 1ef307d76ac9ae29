"""Chapter 15, reference answer: rendezvous keys built and parsed (exercise in
``exercises/ch15_rendezvous_key.py``; the lab's own are
:func:`backends.tf_runtime.rendezvous.rendezvous_key` and ``parse_key``)."""

from __future__ import annotations

KeyFields = tuple[str, int, str, str, int, int]


def make_key(src_device: str, src_incarnation: int, dst_device: str, tensor_name: str,
             frame_id: int = 0, iter_id: int = 0) -> str:
    """Five ``;``-separated fields, the incarnation in 16 hex digits."""
    return (f"{src_device};{src_incarnation:016x};{dst_device};{tensor_name};"
            f"{frame_id}:{iter_id}")


def parse_key(key: str) -> KeyFields:
    """Split on ``;`` first (names hold ``:`` but never ``;``), then the last field on ``:``."""
    fields = key.split(";")
    if len(fields) != 5:
        raise ValueError(f"a rendezvous key has 5 ';'-separated fields, got {key!r}")
    src, incarnation, dst, tensor, where = fields
    frame, colon, iteration = where.partition(":")
    if not colon:
        raise ValueError(f"a rendezvous key ends with frame:iter, got {where!r}")
    return src, int(incarnation, 16), dst, tensor, int(frame), int(iteration)
