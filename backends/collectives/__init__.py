"""Real collective communication (book chapter 2), from scratch on point-to-point messages.

The simulated twins live under the same module and function names in
:mod:`simulator.collectives`.
"""
