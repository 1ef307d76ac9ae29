"""Horovod's world comes from a launcher, never a guess: under ``torchrun`` the ranks form one
world (the ssh-less way to run on several machines); where another launcher announces several
processes but none of the environments Horovod reads is there, ``hvd.init()`` refuses in one
line instead of training one separate copy per process."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from backends.horovod import basics
from backends.horovod.basics import OTHER_LAUNCHERS

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import torch
    import backends.horovod as hvd

    hvd.init()
    total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum)
    print(f"horovod {hvd.rank()} of {hvd.size()}: {total.item():g}", flush=True)
    hvd.shutdown()
""")


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HOROVOD_", "OMPI_", "PMI_", "SLURM_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    return {**env, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), **extra}


def test_horovod_under_torchrun_is_one_world_of_all_its_ranks(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "3",
         str(script)], capture_output=True, text=True, timeout=120, cwd=ROOT,
        env=_environment())
    assert done.returncode == 0, done.stderr[-2000:]
    # three processes print to one pipe: a line's text and its newline are two writes, so
    # lines may interleave; find each rank's report wherever it landed
    lines = sorted(re.findall(r"horovod \d+ of \d+: [\d.]+", done.stdout))
    assert lines == [f"horovod {r} of 3: 6" for r in range(3)]


def test_a_single_process_is_a_world_of_one(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env=_environment())
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "horovod 0 of 1: 1"


@pytest.mark.parametrize("variable", OTHER_LAUNCHERS)
def test_another_launchers_world_without_horovods_environment_is_refused(variable, monkeypatch):
    for name in ("HOROVOD_RANK", "WORLD_SIZE", *OTHER_LAUNCHERS):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, "4")
    with pytest.raises(ValueError) as refused:
        basics._init_default_group(5.0)  # refuses before any group is made
    message = str(refused.value)
    assert "\n" not in message and f"{variable}=4" in message
    assert "horovodrun" in message and "torchrun" in message
