"""Chapter 15 exercise: the rendezvous key a Send and its Recv meet under.

A tensor crossing from one device to another is a ``_Send`` in one partition and a ``_Recv``
in the other; neither knows the other, they only name the same **rendezvous key** (textbook
chapters 15–16, "The rendezvous")::

    src_device;src_incarnation;dst_device;tensor_name;frame_id:iter_id
    /job:worker/replica:0/task:0/device:CPU:0;0000000000000001;/job:worker/replica:0/task:1/device:CPU:0;relu:0;0:0

— five fields separated by ``;``: the sending device, its *incarnation* (a number that changes
whenever the sending process restarts, so a tensor from before a crash is never taken for a
fresh one), written as 16 hexadecimal digits, the receiving device, the tensor (``node:output``),
and the loop frame and iteration that tell the tensors of a ``while`` loop's iterations apart.
The lab's twin is ``backends.tf_runtime.rendezvous`` (``rendezvous_key``, ``parse_key``); the
partitioner (``backends.tf_runtime.partition``) gives every Send/Recv pair its key.

Grade your answer::

    make grade EX=15.3

and read ``solutions/ch15_rendezvous_key.py`` afterwards.
"""

from __future__ import annotations

KeyFields = tuple[str, int, str, str, int, int]
"""``(src_device, src_incarnation, dst_device, tensor_name, frame_id, iter_id)``."""


def make_key(src_device: str, src_incarnation: int, dst_device: str, tensor_name: str,
             frame_id: int = 0, iter_id: int = 0) -> str:
    """The rendezvous key of a tensor sent from ``src_device`` to ``dst_device``."""
    # ===== EXERCISE 15.3: build a rendezvous key and parse it back ==========================
    #
    # Points: 4 (in proportion to the tests of ex15_3 that pass; `make grade EX=15.3`)
    #
    # make_key: the five fields in the order above, joined by ";", the incarnation as 16
    # lower-case hexadecimal digits (zero-padded), the last field "frame:iter".
    #
    # parse_key (below): the six values back, the incarnation and the frame and iteration
    # as ints. A key that does not have exactly five ";"-separated fields, or whose last
    # field is not two integers joined by ":", raises ValueError.
    #
    # Hints:
    #   1. A format specification pads and converts in one go: f"{n:016x}"; int(text, 16)
    #      reads it back.
    #   2. Device names and tensor names contain ":" but never ";", so splitting on ";"
    #      first is safe; only the last field is split on ":".
    #
    # What is graded (tests/exercises/test_ch15_rendezvous_key.py, `make grade EX=15.3`):
    #   - make_key equals backends.tf_runtime.rendezvous.rendezvous_key on random devices,
    #     incarnations (up to 2^64 − 1), tensor names, frames and iterations;
    #   - parse_key inverts make_key and agrees with the lab's parse_key;
    #   - the keys the lab's partitioner gives a real model's Send/Recv pairs parse to the
    #     Send's device, the Recv's device and the crossing tensor;
    #   - malformed keys raise ValueError.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 15.3: implement make_key in "
                              "exercises/ch15_rendezvous_key.py")


def parse_key(key: str) -> KeyFields:
    """The six values of ``key`` (EXERCISE 15.3); :class:`ValueError` for a malformed key."""
    raise NotImplementedError("EXERCISE 15.3: implement parse_key in "
                              "exercises/ch15_rendezvous_key.py")
