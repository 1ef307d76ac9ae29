"""Grading exercise 15.2: a cluster's tasks numbered and looked up as the lab's ``ClusterSpec``
does.

Run with ``make grade EX=15.2`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex15_2
tests/exercises`` (the reference answer).
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from backends.tf_runtime.cluster import ClusterSpec, DeviceName
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch15, pytest.mark.ex15_2]

TODO = ("rank_of / task_of / address_of are not implemented yet: write them in "
        "exercises/ch15_cluster_spec.py (EXERCISE 15.2), then run `make grade EX=15.2` again")

CLUSTERS = st.dictionaries(
    st.sampled_from(["chief", "worker", "ps", "evaluator"]),
    st.integers(1, 5), min_size=1, max_size=4).map(
        lambda sizes: {job: [f"{job}{i}.example:{2222 + i}" for i in range(n)]
                       for job, n in sizes.items()})


def call(function, *args):
    return call_or_fail("ch15_cluster_spec", function, TODO, *args)


@given(CLUSTERS, st.sampled_from(["CPU", "GPU"]), st.integers(0, 3))
def test_every_task_gets_the_rank_of_cluster_spec(jobs, device_type, index):
    spec = ClusterSpec(jobs)
    for job, tasks in jobs.items():
        for task in range(len(tasks)):
            device = str(DeviceName(job, 0, task, device_type, index))
            assert call("rank_of", jobs, device) == spec.rank(device), device
            assert call("address_of", jobs, device) == spec.task_address(job, task), device


@given(CLUSTERS)
def test_task_of_inverts_rank_of_as_cluster_spec_device_does(jobs):
    spec = ClusterSpec(jobs)
    for rank in range(spec.world_size):
        job, task = call("task_of", jobs, rank)
        expected = spec.device(rank)
        assert (job, task) == (expected.job, expected.task), f"rank {rank} of {spec.describe()}"
        assert call("rank_of", jobs, f"/job:{job}/task:{task}") == rank


def test_the_chapters_example():
    jobs = {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"],
            "ps": ["host3:2222"]}
    assert call("rank_of", jobs, "/job:ps/replica:0/task:0/device:CPU:0") == 3
    assert call("task_of", jobs, 2) == ("worker", 1)
    assert call("address_of", jobs, "/job:worker/task:1/device:GPU:0") == "host2:2222"


@pytest.mark.parametrize(("function", "argument"), [
    ("rank_of", "/job:evaluator/task:0"), ("rank_of", "/job:worker/task:2"),
    ("address_of", "/job:ps/task:1"), ("task_of", 4), ("task_of", -1)])
def test_what_is_not_in_the_cluster_raises_value_error(function, argument):
    jobs = {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"],
            "ps": ["host3:2222"]}
    try:
        call(function, jobs, argument)
    except ValueError:
        return
    pytest.fail(f"{function}(jobs, {argument!r}) should raise ValueError", pytrace=False)
