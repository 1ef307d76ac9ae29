"""Fitting α and β, and a real (quick) calibration written to a file."""

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab.calibrate import calibrate, fit_alpha_beta
from simulator.core.calibration import load_calibration
from simulator.host import local_host_cluster

SIZES = [2**k for k in range(10, 27, 2)]


@given(alpha=st.floats(1e-7, 1e-2), bw=st.floats(1e6, 1e11))
def test_fit_recovers_alpha_and_beta_from_exact_data(alpha, bw):
    times = [alpha + n / bw for n in SIZES]
    fit = fit_alpha_beta(SIZES, times)
    assert fit.alpha_s == pytest.approx(alpha, rel=1e-6)
    assert fit.bandwidth_Bps == pytest.approx(bw, rel=1e-6)
    assert max(abs(r) for r in fit.rel_residuals) < 1e-9


def test_fit_weighs_points_by_relative_error():
    # 20 % noise on the biggest point barely moves α, as it would in a plain least squares.
    times = np.array([5e-5 + n / 1e9 for n in SIZES])
    times[-1] *= 1.2
    fit = fit_alpha_beta(SIZES, times)
    assert fit.alpha_s == pytest.approx(5e-5, rel=0.05)


def test_fit_keeps_alpha_non_negative():
    fit = fit_alpha_beta([1000, 2000, 4000], [0.5e-6, 1.5e-6, 3.5e-6])
    assert fit.alpha_s == 0.0 and fit.beta_s_per_B > 0


def test_fit_refuses_nonsense():
    with pytest.raises(ValueError):
        fit_alpha_beta([1], [1.0])
    with pytest.raises(ValueError):
        fit_alpha_beta([1, 2], [1.0, -1.0])


def test_quick_calibration_writes_an_entry_the_simulator_reads(tmp_path, monkeypatch):
    monkeypatch.delenv("DISTML_RANK_SCHED", raising=False)
    path = tmp_path / "cal.json"
    entry = calibrate(2, sizes=[2**12, 2**16, 2**20, 2**22], repeats=3, path=path)
    assert entry.latency_s >= 0 and entry.bandwidth_Bps > 0
    assert entry.reduce_Bps > 0 and entry.memcpy_Bps > 0 and entry.flops_per_s > 0
    assert len(entry.fit_rel_residuals) == 4
    assert list(load_calibration(path)) == [entry.key]
    assert json.loads(path.read_text())["schema"] == 1
    assert entry.exchange_sizes == [2**16, 2**20, 2**22] and entry.bus_bandwidth_Bps > 0
    assert len(entry.shift_ahead_times_s) == 3 and min(entry.shift_ahead_times_s) > 0
    assert entry.swap_ahead_times_s == []  # at two ranks the shift is the swap
    # the shift whose received messages are reduced: the shift plus a reduction a step
    assert len(entry.reduce_ahead_times_s) == 3 and min(entry.reduce_ahead_times_s) > 0
    assert len(entry.stream_times_s) == 3 and min(entry.stream_times_s) > 0
    # rank 0's sends in the ping-pong return, at the latest, when the message has arrived
    assert len(entry.send_return_times_s) == 4 and min(entry.send_return_times_s) > 0
    assert entry.send_buffer_bytes is None  # the shaped network's probe
    assert entry.bus_latency_s >= 0
    assert len(entry.chain_latency_s) == 1 and entry.chain_latency_s[0] > 0  # k = 2
    assert len(entry.chain_ahead_latency_s) == 1 and entry.chain_ahead_latency_s[0] > 0
    assert entry.ready_notice_s is not None and entry.ready_notice_s >= 0
    assert entry.post_overhead_s is not None and entry.post_overhead_s > 0
    assert entry.rank_sched == "batch"  # the launcher's default policy, recorded
    local = local_host_cluster(2, path=path)
    assert local.topology.name == "shared_bus"
    assert local.topology.path_latency_s(0, 1) == pytest.approx(entry.latency_s)
    # opt-in: the collectives' comparisons only; every other model's sends are MPI's (no
    # receiver-driven sends, free posts, sends that complete on arrival, as calibrated)
    assert local.host is None
    driven = local_host_cluster(2, path=path, exchange_bus=True, receiver_driven=True)
    host = driven.host
    assert host is not None
    assert host.receiver_driven_sends and host.ready_notice_s == entry.ready_notice_s
    assert host.post_overhead_s == entry.post_overhead_s
    # the collectives' model returns a send once its socket buffer holds the rest
    assert host.buffered_sends and host.send_buffer_by_bytes


def test_calibration_needs_two_ranks(tmp_path):
    with pytest.raises(ValueError, match="at least 2 ranks"):
        calibrate(1, path=tmp_path / "cal.json")
    assert not (tmp_path / "cal.json").exists()


def _notice_samples(n):
    """Rank function: ``n`` samples of each half of the notice primitive (rank 0's lists)."""
    import torch

    from backends.primitives import ready_notice_step

    buf, stamps = torch.zeros(4096, dtype=torch.uint8), torch.zeros(2, dtype=torch.float64)
    early, late = [], []
    for _ in range(n):
        ready_notice_step(buf, stamps, early, late)
    return early, late


def test_notice_primitive_times_both_halves_from_their_own_start():
    from backends.launch import spawn

    early, late = spawn(_notice_samples, 2, 5, backend="gloo", timeout=60)[0]
    assert len(early) == len(late) == 5
    # each sample is one message's time: positive and far below a second. (The late half once
    # summed both ranks' start stamps, which made it hugely negative and the notice always 0.)
    assert all(0 < t < 0.5 for t in early + late)

