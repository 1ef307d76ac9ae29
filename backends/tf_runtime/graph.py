"""A model as a graph of ops: captured with torch.fx, pruned to its fetches, placed on devices.

Book chapter 16, the first half of a step. A TensorFlow client hands the master a ``GraphDef``;
the master *prunes* it to what the fetches need (``subgraph::RewriteGraphForExecution``, the
feeds becoming placeholders and the fetches outputs) and the **Placer** gives every node a
device (``Placer::Run``: explicit ``tf.device`` requests first, then colocation, then the
default device). Here:

* :func:`capture` — ``torch.fx.symbolic_trace`` of a :class:`torch.nn.Module` into a
  :class:`GraphDef` of :class:`NodeDef` s (TensorFlow's ``GraphDef``/``NodeDef``), each with
  its output's shape and dtype from one run on example inputs (``ShapeProp``: the shape
  inference TensorFlow runs at graph construction) and whether it needs a gradient;
* :func:`prune` — keep only the ancestors of the fetches;
* :func:`place` — a device name per node: by node name, by module path prefix (the
  ``with tf.device(...)`` block around a layer's construction), else colocated with the node's
  first placed input, else the default device;
* :func:`evaluate` — run one node on its input values (TensorFlow's ``OpKernel::Compute``).

A node's inputs are :class:`Ref` s to other nodes' outputs, the single tensor each produces
(``name:0`` in TensorFlow; tuple outputs may not cross devices).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import fx
from torch.fx.passes.shape_prop import ShapeProp

from backends.tf_runtime.cluster import DeviceName


@dataclass(frozen=True)
class Ref:
    """An input edge: the output of node ``name``."""

    name: str


@dataclass(frozen=True)
class NodeDef:
    """One op of the graph: TensorFlow's ``NodeDef`` (name, op, inputs, device, attributes).

    Attributes:
        name: unique node name (fx's).
        op: ``placeholder`` (a feed), ``get_attr`` (a parameter or buffer: a variable),
            ``call_module``, ``call_function`` or ``call_method``.
        target: the module path, function, method name or attribute path.
        args, kwargs: the call's arguments, other nodes' outputs as :class:`Ref`.
        device: the device name it is placed on (``""`` until :func:`place`).
        shape, dtype: its output tensor's, or ``None`` when the output is not one tensor.
        needs_grad: whether a gradient flows back through it (a parameter upstream).
    """

    name: str
    op: str
    target: Any
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    device: str = ""
    shape: tuple[int, ...] | None = None
    dtype: torch.dtype | None = None
    needs_grad: bool = False

    @property
    def inputs(self) -> list[str]:
        """The nodes it reads, in argument order, each once."""
        seen: dict[str, None] = {}
        for ref in _refs((self.args, dict(self.kwargs))):
            seen[ref.name] = None
        return list(seen)

    @property
    def nbytes(self) -> int:
        """Bytes of its output tensor (0 when not a tensor)."""
        if self.shape is None or self.dtype is None:
            return 0
        n = 1
        for d in self.shape:
            n *= d
        return n * self.dtype.itemsize


@dataclass(frozen=True)
class GraphDef:
    """Nodes in a topological order, the fetches (node names the step returns), and the module
    whose submodules and parameters the ``call_module`` and ``get_attr`` nodes name."""

    nodes: tuple[NodeDef, ...]
    fetches: tuple[str, ...]
    module: torch.nn.Module

    def node(self, name: str) -> NodeDef:
        """The node called ``name``."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node {name!r} in the graph")

    @property
    def feeds(self) -> list[str]:
        """The placeholders: the tensors a step feeds."""
        return [n.name for n in self.nodes if n.op == "placeholder"]


def _refs(value: Any) -> Iterable[Ref]:
    if isinstance(value, Ref):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _refs(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _refs(v)


def _convert(value: Any) -> Any:
    """fx arguments with every ``fx.Node`` replaced by a :class:`Ref`."""
    if isinstance(value, fx.Node):
        return Ref(value.name)
    if isinstance(value, (tuple, list)):
        return type(value)(_convert(v) for v in value)
    if isinstance(value, dict):
        return {k: _convert(v) for k, v in value.items()}
    return value


def _owns_parameters(module: torch.nn.Module, node: fx.Node) -> bool:
    if node.op == "call_module":
        sub = module.get_submodule(str(node.target))
        return any(p.requires_grad for p in sub.parameters())
    if node.op == "get_attr":
        value = attribute(module, str(node.target))
        return isinstance(value, torch.Tensor) and value.requires_grad
    return False


def attribute(module: torch.nn.Module, path: str) -> Any:
    """The submodule, parameter or buffer at dotted ``path`` of ``module``."""
    obj: Any = module
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def capture(module: torch.nn.Module, *example_inputs: torch.Tensor) -> GraphDef:
    """The graph of ``module``'s forward, traced with ``torch.fx`` and shaped by one run on
    ``example_inputs``; the fetches are what ``forward`` returns (one tensor or a tuple)."""
    gm = fx.symbolic_trace(module)
    ShapeProp(gm).propagate(*example_inputs)
    nodes: list[NodeDef] = []
    grads: dict[str, bool] = {}
    fetches: tuple[str, ...] = ()
    for n in gm.graph.nodes:
        if n.op == "output":
            out = n.args[0]
            outs = out if isinstance(out, (tuple, list)) else (out,)
            if not all(isinstance(o, fx.Node) for o in outs):
                raise ValueError("the model must return a tensor or a tuple of tensors")
            fetches = tuple(o.name for o in outs)
            continue
        meta = n.meta.get("tensor_meta")
        is_tensor = meta is not None and hasattr(meta, "shape")
        floating = is_tensor and meta.dtype.is_floating_point
        upstream = any(grads.get(i.name, False) for i in n.all_input_nodes)
        needs = bool(floating and (upstream or _owns_parameters(gm, n)))
        grads[n.name] = needs
        nodes.append(NodeDef(n.name, n.op, n.target, _convert(n.args), _convert(n.kwargs),
                             shape=tuple(meta.shape) if is_tensor else None,
                             dtype=meta.dtype if is_tensor else None, needs_grad=needs))
    return GraphDef(tuple(nodes), fetches, gm)


def prune(graph: GraphDef, fetches: Sequence[str] | None = None) -> GraphDef:
    """Only the nodes the ``fetches`` (default: the graph's) depend on, in the same order."""
    fetches = tuple(graph.fetches if fetches is None else fetches)
    by_name = {n.name: n for n in graph.nodes}
    missing = [f for f in fetches if f not in by_name]
    if missing:
        raise KeyError(f"no node {missing[0]!r} to fetch")
    keep: set[str] = set()
    stack = list(fetches)
    while stack:
        name = stack.pop()
        if name not in keep:
            keep.add(name)
            stack += by_name[name].inputs
    return GraphDef(tuple(n for n in graph.nodes if n.name in keep), fetches, graph.module)


def place(graph: GraphDef, default: str | DeviceName,
          by_prefix: Mapping[str, str | DeviceName] | None = None,
          by_name: Mapping[str, str | DeviceName] | None = None) -> GraphDef:
    """Every node on a device (TensorFlow's Placer), first rule that applies:

    1. ``by_name[node]``;
    2. for ``call_module`` and ``get_attr`` nodes, the longest ``by_prefix`` key that is the
       node's module path or a dotted prefix of it (``"encoder"`` places ``encoder.0``);
    3. colocated with its first input that is placed (a shape query or an activation follows
       its tensor), feeds excepted;
    4. ``default``.

    Device names are checked and written in full (:class:`DeviceName`).
    """
    def full(d: str | DeviceName) -> str:
        return str(d if isinstance(d, DeviceName) else DeviceName.parse(d))

    prefixes = {k: full(v) for k, v in (by_prefix or {}).items()}
    names = {k: full(v) for k, v in (by_name or {}).items()}
    unknown = set(names) - {n.name for n in graph.nodes}
    if unknown:
        raise KeyError(f"placement names no node {sorted(unknown)[0]!r}")
    placed: dict[str, str] = {}
    nodes = []
    for n in graph.nodes:
        device = names.get(n.name)
        if device is None and n.op in ("call_module", "get_attr"):
            path = str(n.target)
            hits = [k for k in prefixes if path == k or path.startswith(k + ".")]
            if hits:
                device = prefixes[max(hits, key=len)]
        if device is None and n.op != "placeholder":
            device = next((placed[i] for i in n.inputs if graph.node(i).op != "placeholder"),
                          None)
        placed[n.name] = device or full(default)
        nodes.append(replace(n, device=placed[n.name]))
    return GraphDef(tuple(nodes), graph.fetches, graph.module)


def resolve(value: Any, values: Mapping[str, Any]) -> Any:
    """``value`` with every :class:`Ref` replaced by the output it names."""
    if isinstance(value, Ref):
        return values[value.name]
    if isinstance(value, (tuple, list)):
        return type(value)(resolve(v, values) for v in value)
    if isinstance(value, dict):
        return {k: resolve(v, values) for k, v in value.items()}
    return value


def evaluate(node: NodeDef, values: Mapping[str, Any], owner: Callable[[str], Any]) -> Any:
    """Run ``node`` on ``values`` (every input's output by name); ``owner(path)`` gives the
    submodule or attribute a ``call_module`` or ``get_attr`` node names."""
    args, kwargs = resolve(node.args, values), resolve(dict(node.kwargs), values)
    if node.op == "call_module":
        return owner(str(node.target))(*args, **kwargs)
    if node.op == "call_function":
        return node.target(*args, **kwargs)
    if node.op == "call_method":
        self_arg, *rest = args
        return getattr(self_arg, str(node.target))(*rest, **kwargs)
    if node.op == "get_attr":
        return owner(str(node.target))
    raise ValueError(f"node {node.name!r}: a {node.op} is fed, not evaluated")

