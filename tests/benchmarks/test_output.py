"""benchmarks/_output.py: every run writes new files, all at once, and never over another."""

import argparse
import json
import os
import threading

import pytest

STEM = "p2p_accuracy"


@pytest.fixture
def output(load):
    return load("_output")


def test_a_second_run_in_the_same_second_writes_beside_the_first(output, tmp_path):
    first = output.write_json({"run": 1}, tmp_path, STEM)
    second = output.write_json({"run": 2}, tmp_path, STEM)
    assert first.name == f"{STEM}-{output.RUN_ID}.json"
    assert second.name == f"{STEM}-{output.RUN_ID}-2.json"
    assert json.loads(first.read_text()) == {"run": 1}
    assert json.loads(second.read_text()) == {"run": 2}


def test_an_existing_file_of_that_name_is_never_replaced(output, tmp_path):
    taken = tmp_path / f"{STEM}-{output.RUN_ID}.csv"
    taken.write_text("precious\n")
    path = output.write_csv([{"a": 1}], tmp_path, STEM)
    assert taken.read_text() == "precious\n"
    assert path.name == f"{STEM}-{output.RUN_ID}-2.csv"
    assert path.read_bytes() == b"a\r\n1\r\n"  # csv's own line ends, as before


def test_a_failed_write_leaves_the_old_files_and_no_temporary_file(output, tmp_path, monkeypatch):
    old = output.write_json({"run": 1}, tmp_path, STEM)

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        output.write_json({"run": 2}, tmp_path, STEM)
    assert sorted(p.name for p in tmp_path.iterdir()) == [old.name]
    assert json.loads(old.read_text()) == {"run": 1}


def test_writers_at_once_each_get_a_file_of_their_own(output, tmp_path):
    docs = range(8)
    threads = [threading.Thread(target=output.write_json, args=({"run": i}, tmp_path, STEM))
               for i in docs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    written = sorted(json.loads(p.read_text())["run"] for p in tmp_path.glob(f"{STEM}-*.json"))
    assert written == list(docs)


def test_records_go_to_a_json_and_a_csv_of_one_run(output, tmp_path):
    path = output.write_records([{"bytes": 1024, "t_s": 1e-4}], tmp_path, STEM)
    assert json.loads(path.read_text()) == {"records": [{"bytes": 1024, "t_s": 1e-4}]}
    assert path.with_suffix(".csv").read_text().splitlines()[0] == "bytes,t_s"


def test_csv_columns_are_every_key_of_every_row(output, tmp_path):
    path = output.write_csv([{"a": 1}, {"a": 2, "b": 3}], tmp_path, STEM)
    assert path.read_text().splitlines() == ["a,b", "1,", "2,3"]


def test_save_copy_keeps_the_source_bytes_under_a_new_name(output, tmp_path):
    source = tmp_path / "calibration.json"
    source.write_text('{"entries": {}}')
    copy = output.save_copy(source, tmp_path / "results", "collectives_calibration")
    assert copy.name == f"collectives_calibration-{output.RUN_ID}.json"
    assert copy.read_bytes() == source.read_bytes()


def test_latest_is_the_newest_run_and_its_highest_number(output, tmp_path):
    for name in (f"{STEM}.json", f"{STEM}-20250101-120000.json",
                 f"{STEM}-20250102-080000.json", f"{STEM}-20250102-080000-2.json",
                 f"{STEM}-20250102-080000-10.json", f"{STEM}_run1-20990101-000000.json",
                 f"{STEM}-20990101-000000.csv"):
        (tmp_path / name).write_text("{}")
    assert output.latest(STEM, tmp_path).name == f"{STEM}-20250102-080000-10.json"


def test_latest_takes_a_plainly_named_old_result_when_there_is_no_other(output, tmp_path):
    (tmp_path / f"{STEM}.json").write_text("{}")
    assert output.latest(STEM, tmp_path).name == f"{STEM}.json"


def test_latest_without_a_result_says_what_is_missing(output, tmp_path):
    with pytest.raises(FileNotFoundError, match=f"no {STEM}-YYYYmmdd-HHMMSS.json in"):
        output.latest(STEM, tmp_path)


def test_out_help_says_each_run_writes_new_files(output):
    parser = argparse.ArgumentParser()
    output.add_out(parser)
    assert "never replaces" in parser.format_help()
    assert parser.parse_args([]).out == output.RESULTS
