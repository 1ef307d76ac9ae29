"""The calibration file: locked, atomic updates, and entries checked before they are used."""

import json
import math
import multiprocessing as mp
import os
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.core.atomic import write_atomic
from simulator.core.calibration import (
    SCHEMA_VERSION,
    CalibrationEntry,
    CalibrationError,
    check_entry,
    load_calibration,
    save_entry,
)

WRITERS, ENTRIES_EACH = 8, 10


def measured(world: int = 3, host: str = "h") -> CalibrationEntry:
    """An entry shaped like a real calibration of ``world`` ranks: every list filled."""
    sizes, ex = [2**10, 2**16, 2**20], [2**16, 2**20]
    return CalibrationEntry(
        host=host, backend="gloo", world_size=world, latency_s=5e-5, bandwidth_Bps=4e9,
        reduce_Bps=1.2e10, memcpy_Bps=1.4e10, flops_per_s=1e11, bus_bandwidth_Bps=3e9,
        bus_latency_s=6e-5, cores=2, p2p_sizes=sizes, p2p_times_s=[5e-5, 7e-5, 3e-4],
        fit_rel_residuals=[0.01, -0.02, 0.0], exchange_sizes=ex, exchange_times_s=[1e-4, 5e-4],
        shift_ahead_times_s=[1e-4, 5e-4], swap_ahead_times_s=[1e-4, 5e-4],
        reduce_ahead_times_s=[2e-4, 7e-4], stream_times_s=[9e-5, 4e-4],
        send_return_times_s=[1e-5, 2e-5, 0.0], chain_latency_s=[1e-4] * (world - 1),
        chain_ahead_latency_s=[2e-4] * (world - 1), ready_notice_s=1e-5, post_overhead_s=2e-6,
        rank_sched="batch", created="2026-01-01T00:00:00", torch_version="2.13.0")


def file_with(path: Path, key: str, raw: dict[str, object]) -> Path:
    path.write_text(json.dumps({"schema": SCHEMA_VERSION, "entries": {key: raw}}))
    return path


def _writer(path: str, first: int, start: object) -> None:
    start.wait()  # type: ignore[attr-defined]
    for i in range(first, first + ENTRIES_EACH):
        save_entry(measured(host=f"host{i}"), path)


def test_calibrations_saving_into_one_file_at_once_keep_every_entry(tmp_path):
    path = tmp_path / "cal.json"
    ctx = mp.get_context("fork")
    start = ctx.Barrier(WRITERS)
    procs = [ctx.Process(target=_writer, args=(str(path), w * ENTRIES_EACH, start))
             for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    assert len(load_calibration(path)) == WRITERS * ENTRIES_EACH
    assert sorted(os.listdir(tmp_path)) == ["cal.json"]  # no temporary or lock file left


def test_a_failed_write_leaves_the_old_file_whole_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "cal.json"
    save_entry(measured(), path)
    before = path.read_bytes()

    def fail(*_args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        save_entry(measured(host="other"), path)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["cal.json"]


def test_the_new_text_reaches_the_disk_before_the_rename(tmp_path, monkeypatch):
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd)))
    monkeypatch.setattr(os, "replace", lambda a, b: (calls.append("replace"), real_replace(a, b)))
    write_atomic(tmp_path / "f.json", "{}")
    assert calls == ["fsync", "replace", "fsync"]  # the file, the rename, then the folder


def test_a_measured_entry_passes_its_own_check_and_round_trips(tmp_path):
    for world in (2, 3, 4):
        entry = measured(world)
        assert check_entry(entry.key, asdict(entry)) == entry
        save_entry(entry, tmp_path / "cal.json")
    assert load_calibration(tmp_path / "cal.json")["h/gloo/4"] == measured(4)


def test_an_entry_filed_under_another_world_is_refused(tmp_path):
    raw = asdict(measured(3))
    path = file_with(tmp_path / "cal.json", "h/gloo/2", raw)
    with pytest.raises(CalibrationError, match="'h/gloo/2': holds the data of 'h/gloo/3'"):
        load_calibration(path)
    # its world says 2, but the chain was measured among 2 and 3 ranks: world-3 data
    raw["world_size"] = 2
    with pytest.raises(CalibrationError, match="chain_latency_s has 2 steps"):
        load_calibration(file_with(path, "h/gloo/2", raw))


def test_an_entry_that_fails_its_check_is_never_written(tmp_path):
    path = tmp_path / "cal.json"
    with pytest.raises(CalibrationError, match="bandwidth_Bps must be above zero"):
        save_entry(replace(measured(), bandwidth_Bps=0.0), path)
    assert not path.exists()


POSITIVE = ["bandwidth_Bps", "reduce_Bps", "memcpy_Bps", "flops_per_s", "world_size", "cores"]


def test_a_fitted_latency_of_zero_is_kept_and_a_negative_one_refused(tmp_path):
    path = tmp_path / "cal.json"
    save_entry(replace(measured(), latency_s=0.0), path)  # a quick fit can clamp α to 0
    assert load_calibration(path)[measured().key].latency_s == 0.0
    with pytest.raises(CalibrationError, match="latency_s"):
        save_entry(replace(measured(), latency_s=-1e-6), path)


NUMBERS = [f for f, v in asdict(measured()).items() if isinstance(v, int | float)]
LISTS = [f for f, v in asdict(measured()).items() if isinstance(v, list)]
TEXTS = [f for f, v in asdict(measured()).items() if isinstance(v, str)]
NOT_A_NUMBER = st.one_of(st.text(max_size=5), st.none(), st.booleans(), st.lists(st.just(1)),
                         st.just({"a": 1}))


@st.composite
def bad_fields(draw: st.DrawFn) -> tuple[str, object]:
    """A field of a measured entry and a value it must refuse."""
    kind = draw(st.sampled_from(["type", "sign", "finite", "list", "length", "text"]))
    if kind == "type":
        return draw(st.sampled_from(NUMBERS)), draw(NOT_A_NUMBER.filter(lambda v: v is not None))
    if kind == "sign":
        name = draw(st.sampled_from(POSITIVE))
        return name, draw(st.sampled_from([0, -1, -1e-9, -3.5]))
    if kind == "finite":
        return draw(st.sampled_from(NUMBERS)), draw(st.sampled_from([math.inf, -math.inf,
                                                                   math.nan]))
    if kind == "list":
        name = draw(st.sampled_from(LISTS))
        return name, draw(st.one_of(st.just("fast"), st.just(3.0), st.lists(
            st.sampled_from(["x", None, math.nan, -1.0, True]), min_size=1, max_size=3)))
    if kind == "length":
        name = draw(st.sampled_from([f for f in LISTS if f != "p2p_sizes"
                                     and f != "exchange_sizes"]))
        return name, [1e-4] * draw(st.sampled_from([1, 4, 7]))
    return draw(st.sampled_from(TEXTS)), draw(st.sampled_from([3, None, ["gloo"], 1.5]))


@given(bad=bad_fields())
def test_a_bad_calibration_value_is_one_clear_error_naming_its_field(tmp_path_factory, bad):
    name, value = bad
    raw = asdict(measured())
    raw[name] = value
    path = file_with(tmp_path_factory.mktemp("cal") / "cal.json", "h/gloo/3", raw)
    with pytest.raises(CalibrationError) as info:
        load_calibration(path)
    message = str(info.value)
    assert "\n" not in message
    assert name in message or "holds the data of" in message  # a key field names the key
