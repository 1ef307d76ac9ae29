"""Every benchmark script writes its results through benchmarks/_output.py: new files each run,
written atomically, and an earlier result — even one under the old fixed name — left alone."""

import ast
import json
import sys
from pathlib import Path

import pytest

from tests.benchmarks import BENCHMARKS

SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))
LAB_WRITERS = {"write_json", "write_csv", "write_records", "benchmark_args"}
WRITING_METHODS = {"write_text", "write_bytes", "rename", "replace"}


def _ways_around_output(tree: ast.AST) -> list[str]:
    """What in a script writes a file, or takes ``--out``, other than through ``_output``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "lab.compare":
            found += [f"lab.compare.{a.name}" for a in node.names if a.name in LAB_WRITERS]
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [node.module] if isinstance(node, ast.ImportFrom) else [
                a.name for a in node.names]
            found += [f"import {n}" for n in names if n in ("shutil", "csv")]
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in WRITING_METHODS and not (
                isinstance(func.value, ast.Constant)):  # "a".replace(...) writes nothing
            found.append(f".{func.attr}()")
        if isinstance(func, ast.Attribute) and func.attr == "dump":
            found.append("json.dump()")
        if isinstance(func, ast.Name) and func.id == "open" and len(node.args) > 1:
            found.append("open(…, mode)")
        if (isinstance(func, ast.Attribute) and func.attr == "add_argument" and node.args
                and isinstance(node.args[0], ast.Constant) and node.args[0].value == "--out"):
            found.append('add_argument("--out") (use _output.add_out: its help says the naming)')
    return found


def _imported(tree: ast.AST, module: str) -> set[str]:
    """The names ``tree`` imports from ``module``."""
    return {a.name for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == module for a in node.names}


@pytest.mark.parametrize("script", [*SCRIPTS, BENCHMARKS / "_accuracy.py"],
                         ids=lambda p: p.name)
def test_script_writes_only_through_output(script):
    tree = ast.parse(script.read_text())
    assert not _ways_around_output(tree), f"{script.name}: {_ways_around_output(tree)}"
    if "main" in _imported(tree, "_accuracy"):  # an accuracy benchmark: the runner's --out
        tree = ast.parse((BENCHMARKS / "_accuracy.py").read_text())
    imported = _imported(tree, "_output")
    assert imported & {"add_out", "benchmark_args"}, f"{script.name} takes no --out of _output"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_docstring_names_the_run_id(script):
    assert "<run id>" in ast.get_docstring(ast.parse(script.read_text())), script.name


def _run(module, out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", [module.__file__, "--out", str(out)])
    module.main()


def _stub_pipeline_sim_speed(module, monkeypatch):
    monkeypatch.setattr(module, "SIZES", [(2, 4)])
    monkeypatch.setattr(module, "one", lambda schedule, p, m: {
        "schedule": schedule, "p": p, "m": m, "simpy_wall_s": 0.0, "timeline_wall_s": 0.0,
        "speedup": 1.0, "rel_difference": 0.0})


def _stub_megatron_scale(module, monkeypatch):
    for job in ("gpt3_on_1024", "search_3072", "fast_vs_full"):
        monkeypatch.setattr(module, job, lambda: {"wall_s": 0.0})


def _stub_sim_speed(module, monkeypatch):
    monkeypatch.setattr(module, "one", lambda twin, world, engine, limit, count=False: {
        "twin": twin, "engine": engine, "world": world, "counted": count, "finished": True,
        "wall_s": world / 1e3, "peak_rss_bytes": 0, "predicted_s": 1.0, "engine_used": engine,
        "events": 4 * world * world})


STUBS = {"pipeline_sim_speed": _stub_pipeline_sim_speed, "megatron_scale": _stub_megatron_scale,
         "sim_speed": _stub_sim_speed}


@pytest.mark.parametrize("name", sorted(STUBS))
def test_two_runs_keep_each_other_and_the_old_fixed_name(name, load, tmp_path, monkeypatch):
    # the measuring functions stubbed (the real ones take minutes); main() runs as it is
    module = load(name)
    STUBS[name](module, monkeypatch)
    old = tmp_path / f"{name}.json"  # what these scripts wrote before, every run
    old.write_text("precious\n")
    _run(module, tmp_path, monkeypatch)
    _run(module, tmp_path, monkeypatch)
    assert old.read_text() == "precious\n"
    new = sorted(p.name for p in tmp_path.glob(f"{name}-*.json"))
    run_id = load("_output").RUN_ID
    assert new == [f"{name}-{run_id}-2.json", f"{name}-{run_id}.json"]
    for path in new:
        json.loads((tmp_path / path).read_text())
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
