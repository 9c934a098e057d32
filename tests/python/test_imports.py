"""The package's modules import one another one way only.

_functional (the array API) hands tensors to _torch_ops, importing it lazily on
the first tensor; _torch_ops must not import _functional back, or the two work
only in one import order. torch.py builds on _torch_ops and _swap; neither of
those imports torch.py.
"""

from __future__ import annotations

import ast
import pathlib

import normkit

PKG = pathlib.Path(normkit.__file__).parent


def imported_siblings(name: str) -> set:
    tree = ast.parse((PKG / f"{name}.py").read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            out.update([node.module] if node.module else [a.name for a in node.names])
    return out


def test_no_module_imports_back():
    deps = {n: imported_siblings(n) for n in ("_functional", "_torch_ops", "_swap", "_eps", "torch")}
    assert "_functional" not in deps["_torch_ops"]
    assert "torch" not in deps["_torch_ops"] and "torch" not in deps["_swap"]
    assert deps["_eps"] == set()
    for a, ds in deps.items():
        for b in ds:
            assert a not in deps.get(b, set()), f"{a} and {b} import each other"

