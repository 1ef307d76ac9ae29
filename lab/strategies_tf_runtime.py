"""TensorFlow's distributed runtime as a strategy twin (book chapters 15–16): ``tf.graph``.

A model (:class:`lab.tf_runtime.SkipMLP`: four linear layers, a skip connection from the first
to the last, the loss in the graph) is captured with ``torch.fx``, placed over ``world`` tasks
(contiguous runs of layers), partitioned with Send/Recv pairs, registered on one worker
process per task by a master (rank 0, task 0) and trained step by step with ``RunGraph``
requests (:mod:`backends.tf_runtime`). The world fixes the tasks; the sweep is the batch.

Per point:

* **predicted** — :func:`lab.tf_runtime.predict_step`: every node's forward, backward and
  update profiled on ONE process with one thread, the partitioned step played by
  :func:`simulator.tf_runtime.simulate_graph_step` on this machine's calibrated cluster
  (textbook tier: α, B, the shared bus; host tier: its measured effects) — never a
  measurement of the runtime itself;
* **measured** — :func:`lab.tf_runtime.measure_step`: real training steps timed by the
  master, median, p10 and p90.

Seconds; ``bytes`` is what the partitions send each other in one step (tensors forward,
gradients back).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lab.strategies import StrategyTwin, register
from simulator.core.calibration import Calibration


def _predict(world: int, points: Sequence[Any], calibration: Calibration,
             models: Sequence[str]) -> list[dict[str, Any]]:
    """Profile each batch on one process, then simulate its step in each tier."""
    from lab.tf_runtime import graph_spec, predict_step

    return [{**predict_step(graph_spec(world, batch), calibration, models), "tasks": world}
            for batch in points]


def _measure(world: int, points: Sequence[Any], repeats: int) -> list[dict[str, Any]]:
    """Real training steps of the partitioned graph at each batch."""
    from lab.tf_runtime import graph_spec, measure_step

    return [{**measure_step(graph_spec(world, batch), repeats), "tasks": world}
            for batch in points]


TWIN = register(StrategyTwin(
    name="tf.graph", chapter="15-16", summary="TensorFlow's runtime on PyTorch: an fx graph "
    "placed on world tasks, partitioned with Send/Recv, run by a master's RunGraph calls",
    parameter="batch", points=(32, 128, 512), quick_points=(64,), predict=_predict,
    measure=_measure, worlds=(2, 3), quick_worlds=(2,), max_world=4))
