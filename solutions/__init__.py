"""Reference answers to :mod:`exercises`, one module per chapter under the same name.

Read them after trying the exercise: each answer is written to be read, with the reasoning in
comments. ``DISTML_IMPL=solutions pytest -m ch01 tests/exercises`` grades them (CI does).
"""
