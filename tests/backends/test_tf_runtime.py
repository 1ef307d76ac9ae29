"""TensorFlow's runtime on PyTorch: device names and clusters parse and print, a captured graph
prunes, places and partitions with Send/Recv pairs keyed like TensorFlow's rendezvous, and the
partitions — in threads or in processes under a master — compute exactly what the whole model
computes, forward outputs and parameter gradients alike."""

import pickle

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from backends.launch import spawn
from backends.tf_runtime import (
    ClusterSpec,
    DeviceName,
    MasterSession,
    capture,
    parse_key,
    partition,
    place,
    prune,
    rendezvous_key,
    run_local,
)
from backends.tf_runtime.partition import bytes_sent, cut_edges
from backends.tf_runtime.runtime import server

pytestmark = pytest.mark.timeout(120)
ATOL = 1e-5


# ---- models ---------------------------------------------------------------------------------

class Chain(nn.Module):
    """Three layers in a row."""

    def __init__(self, d_in: int, hidden: int, d_out: int) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(d_in, hidden), nn.Linear(hidden, hidden), \
            nn.Linear(hidden, d_out)

    def forward(self, x):
        return self.c(torch.tanh(self.b(torch.relu(self.a(x)))))


class Skip(nn.Module):
    """A skip connection: ``a``'s output goes to ``b`` and, around it, to ``c``."""

    def __init__(self, d_in: int, hidden: int, d_out: int) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(d_in, hidden), nn.Linear(hidden, hidden), \
            nn.Linear(hidden, d_out)

    def forward(self, x):
        h = torch.relu(self.a(x))
        return self.c(torch.sigmoid(self.b(h)) * h + h)


class TwoHeads(nn.Module):
    """A raw parameter (``get_attr``), a reshape by a size query, two outputs, one of them a
    scalar made on one task and scaled on another."""

    def __init__(self, d_in: int, hidden: int, d_out: int) -> None:
        super().__init__()
        self.a = nn.Linear(d_in, hidden)
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, hidden))
        self.left, self.right = nn.Linear(hidden, d_out), nn.Linear(hidden, 1)

    def forward(self, x):
        h = torch.relu(self.a(x)) * self.scale
        flat = h.reshape(h.size(0), -1)
        return self.left(flat), self.right(flat).sum() * 2.0


MODELS = {"chain": Chain, "skip": Skip, "two_heads": TwoHeads}
PLACEMENTS = {  # module path → task; every other node follows its input
    "chain": lambda n: {"b": 1 % n, "c": (n - 1)},
    "skip": lambda n: {"b": 1 % n, "c": n - 1},
    "two_heads": lambda n: {"scale": 1 % n, "left": n - 1, "right": (n - 2) % n},
}
NAMES = {"skip": lambda n: {"add": n - 1, "mul": 1 % n},
         "two_heads": lambda n: {"mul": 1 % n, "mul_1": 0}}  # a scalar crosses back to 0


def placed(model: str, tasks: int, d_in: int = 5, hidden: int = 7, d_out: int = 3,
           batch: int = 3):
    torch.manual_seed(0)
    net = MODELS[model](d_in, hidden, d_out)
    x = torch.randn(batch, d_in)
    c = ClusterSpec.local(tasks)
    graph = place(prune(capture(net, x)), c.device(0),
                  by_prefix={k: c.device(t) for k, t in PLACEMENTS[model](tasks).items()},
                  by_name={k: c.device(t) for k, t in NAMES.get(model, lambda n: {})(tasks)
                           .items()})
    return net, x, c, graph


def reference(net, x, seeds):
    outs = net(x)
    outs = outs if isinstance(outs, tuple) else (outs,)
    net.zero_grad()
    torch.autograd.backward(list(outs), list(seeds))
    return [o.detach() for o in outs], {k: p.grad.clone() for k, p in net.named_parameters()}


# ---- names ----------------------------------------------------------------------------------

def test_device_name_parses_and_prints_in_full():
    d = DeviceName.parse("/job:worker/replica:0/task:1/device:CPU:0")
    assert d == DeviceName("worker", 0, 1, "CPU", 0)
    assert str(d) == "/job:worker/replica:0/task:1/device:CPU:0"
    assert d.task_name == "/job:worker/replica:0/task:1"


def test_device_name_fills_defaults_and_accepts_the_legacy_form():
    assert str(DeviceName.parse("/task:2/job:ps/gpu:1")) == \
        "/job:ps/replica:0/task:2/device:GPU:1"
    assert DeviceName.parse("/job:chief") == DeviceName(job="chief")


@pytest.mark.parametrize("bad", ["job:worker", "/job:worker/task:x", "/job:1w",
                                 "/job:a/job:b", "/device:CPU", "/host:3"])
def test_bad_device_names_are_refused(bad):
    with pytest.raises(ValueError):
        DeviceName.parse(bad)


@given(st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True), st.integers(0, 99),
       st.integers(0, 999), st.sampled_from(["CPU", "GPU", "TPU"]), st.integers(0, 15))
def test_device_name_round_trips(job, replica, task, kind, index):
    d = DeviceName(job, replica, task, kind, index)
    assert DeviceName.parse(str(d)) == d


def test_cluster_spec_numbers_tasks_job_by_job():
    c = ClusterSpec({"worker": ["w0:1", "w1:1"], "ps": ["p0:1"]})
    assert c.world_size == 3 and c.num_tasks("ps") == 1 and c.task_address("worker", 1) == "w1:1"
    assert [c.rank(c.device(r)) for r in range(3)] == [0, 1, 2]
    assert c.rank("/job:ps/task:0") == 2
    with pytest.raises(ValueError):
        c.rank("/job:worker/task:2")


@given(st.integers(0, 2**64 - 1), st.integers(0, 9), st.integers(0, 9))
def test_rendezvous_keys_round_trip(incarnation, frame, it):
    key = rendezvous_key("/job:worker/replica:0/task:0/device:CPU:0", incarnation,
                         "/job:worker/replica:0/task:1/device:CPU:0", "relu:0", frame, it)
    p = parse_key(key)
    assert (p.src_incarnation, p.tensor_name, p.frame_id, p.iter_id) == \
        (incarnation, "relu:0", frame, it)
    assert key.split(";")[1] == f"{incarnation:016x}"


# ---- graph, placement, partition ------------------------------------------------------------

def test_pruning_keeps_only_what_the_fetch_needs():
    _, _, _, graph = placed("two_heads", 1)
    pruned = prune(graph, ["left"])
    assert "right" not in {n.name for n in pruned.nodes} and pruned.fetches == ("left",)
    assert {"x", "a", "scale", "left"} <= {n.name for n in pruned.nodes}


def test_placement_by_prefix_then_colocation_then_default():
    _, _, c, graph = placed("skip", 3)
    where = {n.name: c.rank(n.device) for n in graph.nodes}
    assert where["a"] == where["relu"] == 0  # default, then colocated with its input
    assert where["b"] == where["sigmoid"] == where["mul"] == 1
    assert where["add"] == where["c"] == 2


def test_skip_connection_crosses_to_two_tasks_with_one_pair_each():
    _, _, c, graph = placed("skip", 3)
    parts = partition(graph, c)
    relu_sends = [s for s in parts[0].sends if s.tensor == "relu"]
    assert sorted(s.peer for s in relu_sends) == [1, 2]  # to two tasks, once each
    assert cut_edges(graph) == [("relu", c.device(1).task_name), ("mul", c.device(2).task_name),
                                ("relu", c.device(2).task_name)]
    for s in relu_sends:  # the Send sits right after its tensor is made
        names = [op.name for op in parts[0].ops]
        assert names.index(s.name) <= names.index("relu") + 2
        recv = next(r for r in parts[s.peer].recvs if r.key == s.key)
        key = parse_key(s.key)
        assert (key.src_device, key.dst_device, key.tensor_name, recv.tag) == \
            (str(c.device(0)), str(c.device(s.peer)), "relu:0", s.tag)


def test_bytes_sent_counts_tensors_and_their_gradients():
    _, _, c, graph = placed("chain", 2, d_in=5, hidden=7, batch=3)
    parts = partition(graph, c)
    assert bytes_sent(parts) == [3 * 7 * 4, 3 * 7 * 4]
    assert bytes_sent(parts, backward=False) == [3 * 7 * 4, 0]


def test_a_variable_on_two_tasks_is_refused():
    c = ClusterSpec.local(2)
    torch.manual_seed(0)
    shared = nn.Linear(4, 4)

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.f = shared

        def forward(self, x):
            return self.f(torch.relu(self.f(x)))

    g = capture(Twice(), torch.randn(2, 4))
    g = place(g, c.device(0), by_name={"f_1": c.device(1)})
    with pytest.raises(ValueError, match="two tasks"):
        partition(g, c)


# ---- running: threads ------------------------------------------------------------------------

@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("tasks", [2, 3, 4])
@pytest.mark.parametrize("shape", [(3, 5, 7, 3), (1, 1, 9, 2), (17, 6, 1, 5)],
                         ids=["3x5", "batch1", "hidden1"])
def test_partitions_equal_the_whole_model(model, tasks, shape):
    batch, d_in, hidden, d_out = shape
    net, x, c, graph = placed(model, tasks, d_in, hidden, d_out, batch)
    ref_net = MODELS[model](d_in, hidden, d_out)
    ref_net.load_state_dict(net.state_dict())
    parts = partition(graph, c)
    seeds = [torch.randn(graph.node(f).shape or ()) for f in graph.fetches]
    out = run_local(parts, {"x": x}, backward=True, grad_outputs=dict(zip(graph.fetches, seeds,
                                                                           strict=True)))
    want, grads = reference(ref_net, x, seeds)
    for f, w in zip(graph.fetches, want, strict=True):
        torch.testing.assert_close(out[f], w, atol=ATOL, rtol=0)
    got = {k: v.grad for p in parts for k, v in p.parameters().items()}
    assert got.keys() == grads.keys()
    for k, g in grads.items():
        torch.testing.assert_close(got[k], g, atol=ATOL, rtol=0)


# ---- running: processes under a master -------------------------------------------------------

PROCESS_MODELS, PROCESS_TASKS, STEPS, LR = ("skip", "two_heads"), 3, 2, 0.1


def _client():
    """Rank 0 of a launch: one session per model, one after the other on the same servers."""
    runs = {}
    for model in PROCESS_MODELS:
        _, x, c, graph = placed(model, PROCESS_TASKS)
        session = MasterSession(graph, c)
        outs = [session.run({"x": x}, backward=True, lr=LR) for _ in range(STEPS)]
        runs[model] = (outs, session.gradients(), session.variables())
        session.close()
    # plain pickle copies the tensors' bytes; the launcher's queue would share them by file
    # descriptor, which dies with the rank
    return pickle.dumps(runs)


@pytest.fixture(scope="module")
def launched():
    return pickle.loads(spawn(server, PROCESS_TASKS, _client, timeout=30)[0])


@pytest.mark.parametrize("model", PROCESS_MODELS)
def test_master_session_trains_like_one_process(launched, model):
    outs, grads, variables = launched[model]
    net, x, _, graph = placed(model, PROCESS_TASKS)
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    for k in range(STEPS):
        outs_ref = net(x)
        outs_ref = outs_ref if isinstance(outs_ref, tuple) else (outs_ref,)
        for f, o in zip(graph.fetches, outs_ref, strict=True):
            torch.testing.assert_close(outs[k][f], o.detach(), atol=ATOL, rtol=0)
        opt.zero_grad()
        torch.autograd.backward(list(outs_ref), [torch.ones_like(o) for o in outs_ref])
        if k == STEPS - 1:
            for name, p in net.named_parameters():
                torch.testing.assert_close(grads[name], p.grad, atol=ATOL, rtol=0)
        opt.step()
    for name, p in net.named_parameters():
        torch.testing.assert_close(variables[name], p.detach(), atol=ATOL, rtol=0)
