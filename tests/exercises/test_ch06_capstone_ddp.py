"""Grading capstone 6.4: a bucketed DDP whose all-reduces overlap backward.

The student's ``BucketedDDP`` trains beside ``torch.nn.parallel.DistributedDataParallel`` on
2, 3 and 4 real processes (one launch per world size, every case in it:
:mod:`tests.exercises.ch06_capstone_ranks`); its ``dist.all_reduce`` calls and the gradient
hooks are traced. Run with ``make grade EX=6.4`` (your answer) or
``DISTML_IMPL=solutions pytest -m ex06_4 tests/exercises`` (the reference answer).
"""

import pytest

from tests.exercises import ch06_capstone_ranks as ranks
from tests.exercises.grading import graded, is_todo, launch

pytestmark = [pytest.mark.ch06, pytest.mark.ex06_4, pytest.mark.timeout(180)]

TODO = ("BucketedDDP is not implemented yet: write it in exercises/ch06_capstone_ddp.py "
        "(EXERCISE 6.4), then run `make grade EX=6.4` again")
WORLDS = (2, 3, 4)
OVERLAP_WORLD = 2  # 2 ranks on this host's 2 cores: the timing is steady enough to compare


@pytest.fixture(scope="module")
def reports():
    """``reports(world)``: every rank's report at that world size, one launch each."""
    outcomes = {}

    def get(world):
        if world not in outcomes:
            todo = [o for o in outcomes.values() if is_todo(o)]
            outcomes[world] = todo[0] if todo else launch(ranks.grade, world,
                                                          world == OVERLAP_WORLD)
        return graded(outcomes[world], world, TODO)

    return get


def case(report, key, index=None):
    """One case of a rank's report; a case in which the code under test raised fails here."""
    got = report[key] if index is None else report[key][index]
    assert "error" not in got, f"BucketedDDP raised: {got['error']}"
    return got


@pytest.mark.parametrize("world", WORLDS)
def test_parameters_equal_pytorch_ddps_after_three_steps(reports, world):
    for rank, report in enumerate(reports(world)):
        for k, cap in enumerate(ranks.CAPS):
            got = case(report, "cases", k)
            assert got["max_diff"] <= 1e-5, (
                f"world {world}, rank {rank}, bucket cap {cap} B: after {ranks.STEPS} SGD steps "
                f"the parameters differ from PyTorch DDP's by {got['max_diff']:.3g}")


def test_construction_broadcasts_rank_0s_parameters(reports):
    for world in WORLDS:
        for rank, report in enumerate(reports(world)):
            assert case(report, "cases", 0)["start_equal"], (
                f"world {world}, rank {rank}: after BucketedDDP(...) the replica differs from "
                "rank 0's (the replicas were built with different seeds)")


def test_one_async_all_reduce_per_bucket_per_step_in_bucket_order(reports):
    for world in WORLDS:
        for rank, report in enumerate(reports(world)):
            for k, cap in enumerate(ranks.CAPS):
                got = case(report, "cases", k)
                expected = got["expected_numels"]
                for step, numels in enumerate(got["numels"]):
                    assert numels == expected, (
                        f"world {world}, rank {rank}, cap {cap} B, step {step}: all-reduces of "
                        f"{numels} elements, in this order; simulator.ddp.assign_buckets makes "
                        f"{len(expected)} buckets of {expected}, to launch in that order")
                assert got["distinct_buffers"] == [len(expected)] * ranks.STEPS, (
                    f"cap {cap} B: each bucket needs its own flat buffer")
                assert got["all_async"], "launch every all-reduce with async_op=True"


def test_a_bucket_launches_before_backward_ends_and_none_is_waited_for_in_it(reports):
    for world in WORLDS:
        for rank, report in enumerate(reports(world)):
            for k, cap in enumerate(ranks.CAPS):
                got = case(report, "cases", k)
                where = f"world {world}, rank {rank}, cap {cap} B"
                assert not any(got["waited_in_backward"]), (
                    f"{where}: an all-reduce was waited for before backward's last gradient "
                    f"(steps {got['waited_in_backward']}): wait only once backward has ended, "
                    "or communication cannot overlap it")
                if len(got["expected_numels"]) < 2:
                    continue  # one bucket: ready only with the last gradient
                assert all(got["first_launch_before_last_grad"]), (
                    f"{where}: in steps {got['first_launch_before_last_grad']} (False) no "
                    "all-reduce started before backward's last gradient: launch each bucket "
                    "from the hook that completes it, not at the end of backward")


def test_the_overlapped_share_of_communication_is_near_the_simulators(reports):
    got = [case(report, "overlap") for report in reports(OVERLAP_WORLD)]
    measured = sum(g["measured"] for g in got) / len(got)
    predicted = sum(g["predicted"] for g in got) / len(got)
    assert not any(g["waited_in_backward"] for g in got), (
        "an all-reduce was waited for before backward's last gradient")
    assert measured >= predicted / 2, (
        f"{measured:.0%} of the all-reduce time ran while backward still computed (mean of "
        f"{ranks.OVERLAP_STEPS} steps and {len(got)} ranks); simulator.ddp.predict_step, fed "
        f"this host's layer and all-reduce times, hides {predicted:.0%}: launch buckets as "
        "they fill, never wait inside a hook")


def test_a_cap_below_one_parameter_puts_each_parameter_alone(reports):
    report = reports(3)[0]
    got = case(report, "cases", ranks.CAPS.index(1))
    assert len(got["expected_numels"]) == 8  # the grader's own check: 8 parameters
    assert got["numels"][0] == got["expected_numels"], (
        f"cap 1 B: all-reduces of {got['numels'][0]} elements; expected one per parameter, "
        f"last registered first: {got['expected_numels']}")


def test_unused_and_frozen_parameters(reports):
    for world in WORLDS:
        for rank, report in enumerate(reports(world)):
            got = case(report, "unused")
            assert got["max_diff"] <= 1e-5, (
                f"world {world}, rank {rank}: with a frozen layer and one forward never uses, "
                f"the parameters differ from PyTorch DDP's (find_unused_parameters=True) by "
                f"{got['max_diff']:.3g}")
            assert got["no_grad"] == got["ref_no_grad"], (
                f"parameters left without a gradient: yours {got['no_grad']}, PyTorch's "
                f"{got['ref_no_grad']}")
            assert got["numels"] == [got["expected_numels"]] * ranks.STEPS, (
                f"world {world}: all-reduces per step {got['numels']}; expected "
                f"{got['expected_numels']} (one bucket per trainable parameter, the unused "
                "one's with zeros, frozen ones in none)")


def test_a_process_group_of_two_among_four_ranks(reports):
    for rank, report in enumerate(reports(4)):
        got = case(report, "group")
        where = f"4 ranks in groups {{0, 1}} and {{2, 3}}, rank {rank}"
        assert got["start_equal"], (
            f"{where}: after BucketedDDP(..., process_group) the replica differs from its "
            "group's rank 0 (global rank 0 or 2)")
        assert got["max_diff"] <= 1e-5, (
            f"{where}: the parameters differ from PyTorch DDP's on the same group by "
            f"{got['max_diff']:.3g}")
        assert got["numels"] == [got["expected_numels"]] * ranks.STEPS, (
            f"{where}: all-reduces per step {got['numels']}, expected {got['expected_numels']}")
