"""Horovod in the lab (chapter 7): ``distml-lab simulate horovod``, and a small prediction beside
a measurement of the real engine on 2 ranks (sane rows, no timing assertions)."""

import json
import math

import pytest

from lab import horovod
from lab.cli import main
from simulator.core.calibration import CalibrationEntry, save_entry, this_host

FAKE = CalibrationEntry(this_host(), "gloo", 2, 5e-5, 4e9, 1.2e10, 1.4e10, 1e11, cores=2)


@pytest.fixture
def fake_calibration(tmp_path, monkeypatch):
    """A calibration file with made-up numbers, as the default file."""
    path = tmp_path / "cal.json"
    for world in (1, 2, 4):
        save_entry(CalibrationEntry(this_host(), "gloo", world, 5e-5, 4e9, 1.2e10, 1.4e10, 1e11,
                                    cores=2), path)
    monkeypatch.setenv("DISTML_CALIBRATION", str(path))
    return path


# ---- distml-lab simulate horovod ---------------------------------------------------------------

def test_simulate_horovod_json_has_the_agreed_fields(capsys, fake_calibration):
    assert main(["simulate", "horovod", "--world", "4", "--fusion-threshold-mb", "0",
                 "--cycle-time-ms", "2", "--widths", "256x5", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["fused_all_reduces"] == doc["tensors"] == 8  # threshold 0: one per tensor
    assert doc["step_s"] > doc["backward_end_s"] > 0 and doc["exposed_comm_s"] >= 0
    assert doc["cycles"] >= 1 and doc["cycle_time_s"] == 2e-3
    assert sum(doc["fused_bytes"]) == doc["parameter_bytes"] and doc["ddp_step_s"] > 0


def test_simulate_horovod_fuses_more_with_a_larger_threshold_on_a_preset(capsys):
    docs = []
    for threshold in ("0", "64"):
        assert main(["simulate", "horovod", "--world", "8", "--cluster", "ethernet-10g",
                     "--fusion-threshold-mb", threshold, "--cycle-time-ms", "5", "--json"]) == 0
        docs.append(json.loads(capsys.readouterr().out))
    assert docs[0]["fused_all_reduces"] == docs[0]["tensors"]
    assert docs[1]["fused_all_reduces"] < docs[0]["fused_all_reduces"]


def test_simulate_horovod_busy_latency_slows_negotiations(capsys, fake_calibration):
    docs = []
    for busy in ("60", "600"):
        assert main(["simulate", "horovod", "--world", "2", "--small-latency-us", "60",
                     "--busy-latency-us", busy, "--json"]) == 0
        docs.append(json.loads(capsys.readouterr().out))
    assert docs[0]["negotiation_s"] == docs[1]["negotiation_s"]
    assert docs[1]["negotiation_busy_s"] > docs[0]["negotiation_busy_s"]
    # slower negotiations during backward: fewer cycles, so larger fused responses (the step
    # itself may then be a little shorter: fewer all-reduces, each paying its latencies once)
    assert docs[1]["cycles"] < docs[0]["cycles"]
    assert docs[1]["fused_all_reduces"] <= docs[0]["fused_all_reduces"]


def test_simulate_horovod_prints_a_table(capsys, fake_calibration):
    assert main(["simulate", "horovod", "--world", "2"]) == 0
    out = capsys.readouterr().out
    assert "background-thread cycles" in out and "fused all-reduces" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--world", "0"], "invalid --world 0"),
    (["--world", "2", "--fusion-threshold-mb", "-1"], "invalid --fusion-threshold-mb -1"),
    (["--world", "2", "--cycle-time-ms", "0"], "invalid --cycle-time-ms 0"),
    (["--world", "2", "--cycle-time-ms", "nan"], "invalid --cycle-time-ms nan"),
    (["--world", "2", "--widths", "12"], "invalid --widths '12'"),
    (["--world", "2", "--batch", "0"], "invalid --batch 0"),
    (["--world", "2", "--cluster", "tpu"], "unknown cluster 'tpu'"),
    (["--world", "3"], "no calibration for"),
    (["--fusion-threshold-mb", "1"], "--world"),
    (["--world", "2", "--busy-latency-us", "-3"], "invalid --busy-latency-us -3"),
    (["--world", "8", "--cluster", "ethernet-10g", "--small-latency-us", "60"], "--cluster local"),
])
def test_simulate_horovod_bad_input_is_one_line(argv, message, capsys, fake_calibration):
    assert main(["simulate", "horovod", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


# ---- prediction beside measurement, 2 ranks ----------------------------------------------------

WIDTHS, BATCH = horovod.SMOKE_WIDTHS, 8


@pytest.fixture(scope="module")
def primitives():
    return horovod.measure_primitives(WIDTHS, BATCH, world=2, cores=2, interference=False,
                                      repeats=3)


def test_primitives_are_measured(primitives):
    assert len(primitives.workload.layers) == len(WIDTHS) - 1
    assert all(x.forward_s > 0 and x.backward_s > 0 for x in primitives.workload.layers)
    assert primitives.optimizer_s > 0 and primitives.copies == 2
    assert 0 < primitives.small_latency_s < 0.1 and 0 < primitives.busy_latency_s < 0.1
    assert 0 < primitives.ring_step_s < 0.1 and 0 < primitives.cycle_cpu_s < 0.01


def test_tiny_all_reduces_cost_a_ring_step_per_wait(primitives):
    # a 4 KiB all-reduce at 2 ranks: 4 segments per rank received, each a ring step's wait
    costs = horovod.costs(FAKE, 2, primitives)
    seconds, latency_bound = costs.all_reduce(4096, busy=False)
    assert latency_bound and seconds == pytest.approx(4 * primitives.ring_step_s, rel=0.05)


def test_sweep_puts_prediction_beside_measurement(primitives):
    points = [("threshold", 0.0, 1.0), ("cycle", 64.0, 5.0)]
    rows = horovod.sweep(FAKE, primitives, WIDTHS, 2, points, repeats=2)
    assert [(r.sweep, r.fusion_threshold_mb, r.cycle_time_ms) for r in rows] == points
    for row in rows:
        assert row.predicted_s > 0 and row.measured_median_s > 0
        assert row.measured_p10_s <= row.measured_median_s <= row.measured_p90_s
        assert math.isfinite(row.rel_error)
    tensors = 2 * (len(WIDTHS) - 1)
    assert rows[0].predicted_all_reduces == tensors  # threshold 0: one all-reduce per tensor
    assert rows[0].measured_all_reduces == tensors  # the real engine agrees
    assert rows[1].predicted_all_reduces <= tensors


def test_measured_and_predicted_timelines_share_span_names(primitives):
    measured = horovod.timeline(2, WIDTHS, BATCH, 64.0, 1.0)
    predicted = horovod.predict(FAKE, primitives, 2, 64.0, 1.0).trace
    background = {"NEGOTIATE", "ALLREDUCE", "ENQUEUE"}
    for trace in (measured, predicted):
        kinds = {s.kind for s in trace}
        assert background <= kinds and {"compute", "wait"} <= kinds
        assert {s.rank for s in trace} == {0, 1}
    assert {s.kind for s in measured} <= set(horovod.LANES) | {"BROADCAST"}
    fig = horovod.plot_cycles([("predicted", predicted), ("measured", measured)])
    assert len(fig.axes) == 2


def test_horovod_versus_ddp_rows(primitives):
    rows = horovod.versus_ddp(FAKE, primitives, WIDTHS, 2, repeats=2)
    assert [r.engine for r in rows] == ["horovod", "ddp"]
    assert all(r.predicted_s > 0 and r.measured_median_s > 0 for r in rows)


def test_launch_prediction_shares_the_cores():
    two = horovod.predict_launch(FAKE, 2, start_s=1.0)
    four = horovod.predict_launch(FAKE, 4, start_s=1.0)
    assert four.ready_s > two.ready_s > 1.0
