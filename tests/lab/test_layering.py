"""The layers point one way: ``lab → backends → simulator``, and ``lab/`` is glue.

DESIGN.md's layout: ``simulator/`` never imports torch (so it installs anywhere), ``backends/``
never imports ``lab/`` (the real twins stand on their own), and ``lab/`` makes no
``torch.distributed`` calls of its own — the rank code a measurement runs lives in
``backends/``, where a reader looks for what really happens. The checks read every module's
imports and attribute uses with :mod:`ast`, inside functions too (a lazy import only
postpones the dependency).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """Every module name ``path`` imports, with its line (``from a import b`` gives ``a.b``)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield from ((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)


def dotted(node: ast.AST) -> str:
    """``torch.distributed`` for that attribute chain, else ``""``."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""


def offending(package: str, bad: tuple[str, ...], root: Path = ROOT) -> list[str]:
    """``file:line name`` for each import in ``root/package`` starting with one of ``bad``, and
    each attribute use of one of them (``torch.distributed.barrier()`` after ``import torch``)."""
    names = {b.rstrip(".") for b in bad}
    found = []
    for path in sorted((root / package).rglob("*.py")):
        where = path.relative_to(root)
        for line, name in imports(path):
            if name.startswith(bad) or name in names:
                found.append(f"{where}:{line} {name}")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and dotted(node) in names:
                found.append(f"{where}:{node.lineno} {dotted(node)}")
    return found


def test_the_checker_sees_lazy_imports_and_attribute_calls(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text("import torch\n\ndef f():\n    import torch.distributed as d\n"
                                  "    from torch import distributed\n"
                                  "    torch.distributed.barrier()\n")
    found = offending("pkg", ("torch.distributed",), root=tmp_path)
    assert [f.split()[0] for f in found] == ["pkg/m.py:4", "pkg/m.py:5", "pkg/m.py:6"]


def test_lab_makes_no_torch_distributed_calls():
    assert offending("lab", ("torch.distributed",)) == []


def test_backends_never_import_lab():
    assert offending("backends", ("lab.",)) == []


def test_simulator_never_imports_torch():
    assert offending("simulator", ("torch.", "torch")) == []
