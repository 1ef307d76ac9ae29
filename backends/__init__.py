"""The real twins: what *does* happen, on real processes with ``torch.distributed``.

Start with :mod:`backends.launch` (one process per rank) and :mod:`backends.measure` (timing).
"""
