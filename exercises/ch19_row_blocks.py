"""Chapter 19 exercise: where a row of a sharded variable lives.

ParameterServerStrategy cuts a large weight — an embedding table of ``rows`` rows — into row
blocks, one block per **shard**, and places the shards round-robin over the ps tasks (textbook
chapter 19, "Variables sharded over the ps tasks"; TF's ``ShardedVariable`` and its
partitioners). A worker that looks up a few rows must know, for each, which shard holds it and
at which row of that shard: that is all ``ShardedVariable.lookup`` needs to send each ps only
the rows it holds. The lab's twin is :mod:`backends.tf_distribute.ps_strategy`.

The rule for the blocks (TF's): ``rows`` over ``n`` shards, the first ``rows mod n`` shards one
row longer than the others. How many shards a variable gets is the partitioner's choice:
``MinSizePartitioner`` gives as many as keep every shard at least ``min_shard_bytes`` bytes,
never more than ``max_shards``, never more than one per row, and always at least one.

Grade your answer::

    make grade EX=19.1

and read ``solutions/ch19_row_blocks.py`` afterwards.
"""

from __future__ import annotations


def row_blocks(rows: int, shards: int) -> list[tuple[int, int]]:
    """The ``[begin, end)`` rows of each of ``shards`` shards of a ``rows``-row variable.

    Raises:
        ValueError: ``shards`` is below 1 or above ``rows`` (a shard would be empty).
    """
    # ===== EXERCISE 19.1: row blocks, the shard of a row, the number of shards =============
    #
    # Points: 6 (in proportion to the tests of ex19_1 that pass; `make grade EX=19.1`)
    #
    # Three small functions: this one, shard_of_row and min_size_shards below.
    #
    # Hints:
    #   1. divmod(rows, shards) gives the short blocks' length and how many blocks are one
    #      row longer. Write out rows = 10 over 3 shards by hand: (0, 4), (4, 7), (7, 10).
    #   2. Each block begins where the previous one ended; the last ends at ``rows``.
    #   3. A variable of 1 row cut into 1 shard is fine; 3 rows into 4 shards is not.
    #
    # What is graded (tests/exercises/test_ch19_row_blocks.py):
    #   - for any rows and shards, your blocks, shards and shard counts equal those of the
    #     twin (backends.tf_distribute.ps_strategy: row_blocks, shard_of_row,
    #     MinSizePartitioner), and bad arguments raise ValueError / IndexError;
    #   - on a real cluster of 2 ps tasks, a variable made by MinSizePartitioner has your
    #     number of shards and your blocks, and each row, read straight from the ps task at
    #     the shard and local row that shard_of_row names, is that row of the variable.
    # =========================================================================================
    raise NotImplementedError("EXERCISE 19.1: implement row_blocks in "
                              "exercises/ch19_row_blocks.py, then run `make grade EX=19.1`")


def shard_of_row(row: int, rows: int, shards: int) -> tuple[int, int]:
    """``(shard, local row)`` of global row ``row`` in a ``rows``-row variable of ``shards``
    shards cut by :func:`row_blocks`: ``row_blocks(...)[shard][0] + local == row``.

    Raises:
        IndexError: ``row`` is not in ``0 … rows − 1``.
    """
    # ===== EXERCISE 19.1b: the shard of a row ================================================
    #
    # Do it in O(1), without building the blocks: a lookup of a batch of ids calls this once
    # per id. The first ``rows mod shards`` blocks have length ``base + 1``: how many rows do
    # they hold in all? A row below that count is in one of them; a row above it is in one of
    # the blocks of length ``base``, counted from where the long blocks end.
    # =========================================================================================
    raise NotImplementedError("EXERCISE 19.1: implement shard_of_row in "
                              "exercises/ch19_row_blocks.py, then run `make grade EX=19.1`")


def min_size_shards(rows: int, row_bytes: int, min_shard_bytes: int, max_shards: int) -> int:
    """The number of shards ``MinSizePartitioner(min_shard_bytes, max_shards)`` gives a
    variable of ``rows`` rows of ``row_bytes`` bytes each (a float32 row of ``cols`` columns
    is ``4·cols`` bytes)."""
    # ===== EXERCISE 19.1c: how many shards ===================================================
    #
    # Every shard must hold at least min_shard_bytes: how many shards of that size fit in the
    # variable's bytes (round down: a shard may be larger, never smaller)? Then apply the
    # three caps of the module docstring. A variable smaller than min_shard_bytes still
    # needs somewhere to live.
    # =========================================================================================
    raise NotImplementedError("EXERCISE 19.1: implement min_size_shards in "
                              "exercises/ch19_row_blocks.py, then run `make grade EX=19.1`")
