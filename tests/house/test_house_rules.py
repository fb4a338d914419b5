"""The house's size and shape rules over placer/, read from the source with ast (the judge is the
parse tree, not placer's own code): no module over 500 lines, no class over 300, no function over
60; the daemon is composed, so none of its classes inherits from another class of placer's.
McCabe complexity is ruff's C901 (max 12, pyproject), run by .ci/run."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "placer"
MAX_MODULE, MAX_CLASS, MAX_FUNCTION = 500, 300, 60


def _span(node: ast.AST) -> int:
    return node.end_lineno - node.lineno + 1   # type: ignore[attr-defined,operator]


def oversized(source: str, where: str) -> list[str]:
    """Every module, class and function in source longer than the house allows."""
    out = []
    lines = len(source.splitlines())
    if lines > MAX_MODULE:
        out.append(f"{where}: module {lines} lines > {MAX_MODULE}")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and _span(node) > MAX_CLASS:
            out.append(f"{where}:{node.lineno}: class {node.name} {_span(node)} lines > {MAX_CLASS}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _span(node) > MAX_FUNCTION:
            out.append(f"{where}:{node.lineno}: function {node.name} {_span(node)} lines > {MAX_FUNCTION}")
    return out


def _modules() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def test_no_module_class_or_function_is_over_the_house_limits():
    found = [line for path in _modules()
             for line in oversized(path.read_text(), str(path.relative_to(ROOT.parent)))]
    assert found == []


def test_the_size_check_can_fail():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION))
    source = f"def long():\n{body}\n"
    assert oversized(source, "probe.py") == [f"probe.py:1: function long {MAX_FUNCTION + 1} lines > {MAX_FUNCTION}"]
    assert oversized("def short():\n    return 1\n", "probe.py") == []


def placer_class_bases(source: str) -> list[tuple[str, str]]:
    """(class, base) for every class whose base is a class defined in placer (imported from placer
    or defined in the same module); Protocol, Exception, NamedTuple and the like are not placer's."""
    tree = ast.parse(source)
    own = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    # placer's error types form a hierarchy on purpose (callers catch KubeError): not composition's concern
    imported = {alias.asname or alias.name for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("placer")
                and n.module != "placer.model.errors" for alias in n.names}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
                if name in own or name in imported:
                    out.append((node.name, name))
    return out


def test_the_daemon_is_composed_not_inherited():
    found = [(str(path.relative_to(ROOT.parent)), *pair) for path in sorted((ROOT / "daemon").glob("*.py"))
             for pair in placer_class_bases(path.read_text())]
    assert found == []


def test_the_inheritance_check_can_fail():
    assert placer_class_bases("class A:\n    pass\nclass B(A):\n    pass\n") == [("B", "A")]
    assert placer_class_bases("from placer.daemon.state import S\nclass B(S):\n    pass\n") == [("B", "S")]
    assert placer_class_bases("from typing import Protocol\nclass P(Protocol):\n    pass\n") == []
    assert placer_class_bases("from placer.model.errors import KubeError\nclass E(KubeError):\n    pass\n") == []


@pytest.mark.parametrize("package", sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()))
def test_every_package_says_what_it_owns(package):
    doc = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text()))
    assert doc and len(doc.split()) >= 5, f"placer/{package}/__init__.py has no docstring saying what it owns"
