"""The simulated twins: what *should* happen on a cluster.

A SimPy discrete-event model of ranks, links and devices. Nothing here imports torch, so the
simulator installs and runs anywhere. Start with :mod:`simulator.core`.
"""
