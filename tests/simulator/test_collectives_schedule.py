"""The shared shapes: MPICH's fold and NCCL's binary and double binary trees."""

from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.schedule import Fold, binary_tree, children, double_binary_tree


def test_fold_of_six_matches_the_docstring_table():
    fold = Fold(6)
    assert (fold.size, fold.extra) == (4, 2)
    assert [fold.new_rank(r) for r in range(6)] == [0, None, 1, None, 2, 3]
    assert [list(fold.blocks(i)) for i in range(4)] == [[0, 1], [2, 3], [4], [5]]


@given(p=st.integers(1, 300))
def test_fold_survivors_stand_for_every_rank_once(p):
    fold = Fold(p)
    assert fold.size <= p < 2 * fold.size
    covered = [r for i in range(fold.size) for r in fold.blocks(i)]
    assert covered == list(range(p))
    assert all(fold.new_rank(fold.old_rank(i)) == i for i in range(fold.size))


def test_binary_tree_of_fourteen_matches_the_docstring_drawing():
    parents = binary_tree(14)
    assert children(parents, 0) == [8]
    assert children(parents, 8) == [4, 12]
    assert children(parents, 4) == [2, 6]
    assert children(parents, 12) == [10, 13]
    assert all(children(parents, r) == [] for r in range(1, 14, 2))  # odd ranks are leaves


@given(p=st.integers(1, 200))
def test_binary_tree_reaches_every_rank_from_zero(p):
    parents = binary_tree(p)
    for r in range(p):
        hops, node = 0, r
        while parents[node] is not None:
            node, hops = parents[node], hops + 1
            assert hops < p
        assert node == 0


@given(p=st.integers(2, 200))
def test_double_tree_has_no_inner_rank_twice_for_even_p(p):
    first, second = double_binary_tree(p)
    inner_first = {q for q in first if q is not None}
    inner_second = {q for q in second if q is not None}
    assert sum(q is None for q in second) == 1  # one root
    if p % 2 == 0:
        assert inner_first.isdisjoint(inner_second)
