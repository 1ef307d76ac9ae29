"""Starting ``torchrun`` agents as separate "nodes" of one machine, for the multi-node tests
and ``benchmarks/torchrun_twins.py``: each agent its own process tree, meeting through the
c10d rendezvous on a loopback port, every process reaped whatever happens."""

from __future__ import annotations

import contextlib
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
              run_id: str = "distml-test", shaped: str | None = None
              ) -> list[subprocess.CompletedProcess[str]]:
    """``torchrun --nnodes nodes --nproc-per-node per_node -m MODULE_ARGS…`` as ``nodes``
    agents started side by side; returns each agent's completed process (output captured).
    Agents still running after ``timeout_s`` are killed with their ranks.

    ``shaped`` (a rate such as ``"100mbit"``; needs root): each agent, with its ranks, runs in
    its own network namespace of :class:`backends.shaped.ShapedNetwork`, one "machine" per
    namespace on a rate-limited switch port — the rendezvous, the store and gloo's traffic all
    cross the shaped links, node 0's address the rendezvous endpoint."""
    if shaped is None:
        return _agents(nodes, per_node, module_args, timeout_s, run_id, "127.0.0.1", None)
    from backends.shaped import RANK_IFNAME, ShapedNetwork
    from simulator.core.shaped import parse_rate

    with ShapedNetwork([parse_rate(shaped)] * nodes, tag="t") as net:
        return _agents(nodes, per_node, module_args, timeout_s, run_id, net.rank_addr(0),
                       [(net.rank_ns(k), net.rank_addr(k)) for k in range(nodes)], RANK_IFNAME)


def _agents(nodes: int, per_node: int, module_args: Sequence[str], timeout_s: float,
            run_id: str, host: str, namespaces: list[tuple[str, str]] | None,
            ifname: str = "lo"
            ) -> list[subprocess.CompletedProcess[str]]:
    port = free_port() if namespaces is None else 29400  # a fresh namespace has it free
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nodes),
               "--nproc-per-node", str(per_node), "--rdzv-backend", "c10d",
               "--rdzv-endpoint", f"{host}:{port}", "--rdzv-id", run_id,
               "--max-restarts", "0", "-m", *module_args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if namespaces is not None:  # gloo on the namespace's link, not on lo
        env.update({"GLOO_SOCKET_IFNAME": ifname, "TP_SOCKET_IFNAME": ifname})
    # in a namespace torchrun cannot tell it owns the endpoint's address, nor which address
    # its ranks' store should announce: say who hosts the rendezvous, and each node's address
    starts = ([["ip", "netns", "exec", ns, *command[:-len(module_args) - 1],
                "--rdzv-conf", f"is_host={str(k == 0).lower()}", "--local-addr", addr,
                "-m", *module_args] for k, (ns, addr) in enumerate(namespaces)]
              if namespaces is not None else [command] * nodes)
    agents = [subprocess.Popen(start, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
              for start in starts]
    done = []
    try:
        for agent in agents:
            out, err = agent.communicate(timeout=timeout_s)
            done.append(subprocess.CompletedProcess(agent.args, agent.returncode, out,
                                                    err))
    finally:
        for agent in agents:  # each agent leads its own session; its ranks may lead theirs
            if agent.poll() is None:
                ranks = _descendants(agent.pid)
                os.killpg(agent.pid, signal.SIGKILL)
                for pid in ranks:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                agent.wait()
    return done


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid``, read from ``/proc`` (torchrun starts its ranks in
    sessions of their own, so killing the agent's process group does not reach them)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                parent = int(stat[stat.rindex(")") + 2:].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
