"""environment.yml (conda) and pyproject.toml (pip) pin the same packages and versions."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"pytorch": "torch"}  # conda-forge name -> PyPI name


def pip_pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + project["optional-dependencies"]["dev"]
    pins = {}
    for req in reqs:
        name, version = req.split("==")
        pins[name.lower()] = version
    return pins


def conda_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "environment.yml").read_text().splitlines():
        m = re.match(r"^\s*-\s*([A-Za-z0-9_.-]+)=([^=\s]+)", line)
        if m and m.group(1) != "python":
            pins[CONDA_NAMES.get(m.group(1), m.group(1)).lower()] = m.group(2)
    return pins


def test_every_dependency_is_pinned_exactly_in_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for req in project["dependencies"] + project["optional-dependencies"]["dev"]:
        assert re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][^,;\s]*", req), req


def test_conda_and_pip_name_the_same_packages_and_versions():
    assert conda_pins() == pip_pins()
