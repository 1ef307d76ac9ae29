"""Simulated collective communication (book chapter 2), one module per operation.

Each module holds rank programs for :func:`simulator.core.run_spmd` and, beside each, the
closed-form α-β cost from ``../shared/REFERENCES.md``. The real twins live under the same names
in :mod:`backends.collectives`.
"""
