"""The GPU check refuses, before any work, where no GPU is visible: one line, exit status 2,
nothing written."""

import subprocess
import sys

import pytest
import torch

from tests.benchmarks import BENCHMARKS


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible: the check would run")
def test_without_a_gpu_it_stops_in_one_line_and_writes_nothing(tmp_path):
    done = subprocess.run([sys.executable, str(BENCHMARKS / "gpu_check.py"), "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "no CUDA GPU" in done.stderr
    assert "--allow-cpu" in done.stderr
    assert list(tmp_path.iterdir()) == []
