"""The trace schema and its Chrome trace export."""

import json

from simulator.core import Trace


def test_chrome_trace_has_one_complete_event_per_span_in_microseconds(tmp_path):
    trace = Trace()
    trace.record(0, "send", "send 0->1", 1.0, 1.5, 64)
    trace.record(1, "recv", "recv 0->1", 1.0, 1.5, 64)
    path = trace.write_chrome(tmp_path / "t.json", "predicted")
    doc = json.loads(path.read_text())
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert [(e["tid"], e["ts"], e["dur"], e["args"]["bytes"]) for e in spans] == [
        (0, 1e6, 5e5, 64), (1, 1e6, 5e5, 64)]
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"}
    assert names == {"predicted", "rank 0", "rank 1"}


def test_records_round_trip_and_shift_to_zero():
    trace = Trace()
    trace.record(2, "compute", "fwd", 10.0, 12.0)
    again = Trace.from_records(trace.to_records())
    assert again.spans == trace.spans
    assert again.shifted().spans[0].start == 0.0
    assert again.shifted().spans[0].duration == 2.0
