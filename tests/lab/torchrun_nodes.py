"""Starting ``torchrun`` agents as separate "nodes" of one machine, for the multi-node tests
and ``benchmarks/torchrun_twins.py``: each agent its own process tree, meeting through the
c10d rendezvous on a loopback port, every process reaped whatever happens."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A loopback port free right now (for the rendezvous endpoint)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_nodes(nodes: int, per_node: int, module_args: Sequence[str], timeout_s: float,
              run_id: str = "distml-test") -> list[subprocess.CompletedProcess[str]]:
    """``torchrun --nnodes nodes --nproc-per-node per_node -m MODULE_ARGS…`` as ``nodes``
    agents started side by side; returns each agent's completed process (output captured).
    Agents still running after ``timeout_s`` are killed with their ranks."""
    port = free_port()
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nodes),
               "--nproc-per-node", str(per_node), "--rdzv-backend", "c10d",
               "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", run_id,
               "--max-restarts", "0", "-m", *module_args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    agents = [subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
              for _ in range(nodes)]
    done = []
    try:
        for agent in agents:
            out, err = agent.communicate(timeout=timeout_s)
            done.append(subprocess.CompletedProcess(command, agent.returncode, out, err))
    finally:
        for agent in agents:  # each agent leads its own session: kill it with its ranks
            if agent.poll() is None:
                os.killpg(agent.pid, signal.SIGKILL)
                agent.wait()
    return done
