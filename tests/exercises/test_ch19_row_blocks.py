"""Grading exercise 19.1: row blocks of a sharded variable, against the ParameterServerStrategy
twin — its pure functions, and a real variable on 2 ps tasks read row by row."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.tf_distribute import ps_strategy as twin
from backends.tf_distribute.ps_channel import request, task_name
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch19, pytest.mark.ex19_1]


def todo(function):
    return (f"{function} is not implemented yet: write it in exercises/ch19_row_blocks.py "
            "(EXERCISE 19.1), then run `make grade EX=19.1` again")


def student(function, *args):
    return call_or_fail("ch19_row_blocks", function, todo(function), *args)


@st.composite
def cuts(draw):
    rows = draw(st.integers(1, 300))
    return rows, draw(st.integers(1, rows))


@settings(max_examples=60)
@given(cuts())
def test_row_blocks_equal_the_twins(cut):
    rows, shards = cut
    got, expected = student("row_blocks", rows, shards), twin.row_blocks(rows, shards)
    assert [tuple(b) for b in got] == expected, f"{rows} rows over {shards} shards"


@settings(max_examples=60)
@given(cuts())
def test_shard_of_every_row_equals_the_twins(cut):
    rows, shards = cut
    for row in range(rows):
        got = tuple(student("shard_of_row", row, rows, shards))
        expected = twin.shard_of_row(row, rows, shards)
        assert got == expected, f"row {row} of {rows} rows over {shards} shards"


@settings(max_examples=80)
@given(st.integers(1, 10_000), st.integers(1, 4096), st.integers(1, 1 << 22),
       st.integers(1, 64))
def test_min_size_shards_equal_the_partitioners(rows, row_bytes, min_shard_bytes, max_shards):
    got = student("min_size_shards", rows, row_bytes, min_shard_bytes, max_shards)
    expected = twin.MinSizePartitioner(min_shard_bytes, max_shards)(rows, row_bytes)
    assert got == expected, (f"{rows} rows of {row_bytes} B, shards ≥ {min_shard_bytes} B, "
                             f"at most {max_shards}: you {got}, MinSizePartitioner {expected}")


def test_impossible_cuts_and_missing_rows_raise():
    for rows, shards in ((3, 4), (3, 0)):
        with pytest.raises(ValueError):
            student("row_blocks", rows, shards)
    for row in (-1, 10):
        with pytest.raises(IndexError):
            student("shard_of_row", row, 10, 3)


# (rows, cols, MinSizePartitioner's min_shard_bytes and max_shards)
VARIABLES = [(50, 3, 100, 4), (7, 3, 16, 8), (13, 2, 1 << 20, 4), (31, 1, 8, 6)]


def test_a_real_sharded_variable_has_your_shards_and_rows():
    yours = []  # (blocks, shard and local row of each row) of each variable
    for rows, cols, min_bytes, max_shards in VARIABLES:
        shards = student("min_size_shards", rows, 4 * cols, min_bytes, max_shards)
        yours.append(([tuple(b) for b in student("row_blocks", rows, shards)],
                      [student("shard_of_row", row, rows, shards) for row in range(rows)]))
    with twin.LocalCluster(num_workers=1, num_ps=2) as cluster:
        for k, ((rows, cols, min_bytes, max_shards), (blocks, where)) in enumerate(
                zip(VARIABLES, yours, strict=True)):
            strategy = twin.ParameterServerStrategy(
                cluster, twin.MinSizePartitioner(min_bytes, max_shards))
            value = torch.arange(float(rows * cols)).view(rows, cols)
            var = strategy.create_variable(f"table{k}", value)
            placed = [(s.begin, s.end) for s in var.shards]
            assert placed == blocks, f"{rows} × {cols} variable: on the ps {placed}, yours {blocks}"
            for row, (shard, local) in enumerate(where):
                s = var.shards[shard]
                got = request(task_name("ps", s.ps), var.ps_addresses[s.ps], var.authkey,
                              ("gather", s.name, torch.tensor([local])))
                assert torch.equal(got[0], value[row]), (
                    f"row {row}: read shard {shard} row {local} on ps {s.ps}, got "
                    f"{got[0].tolist()}, expected {value[row].tolist()}")
