"""The layout holds: imports point down the layers only, no import circle, SQL and `sqlite3`
only in the storage layer, and no module grows past the size a reader can hold.

The layers, bottom to top (docs/architecture.md):
    errors, util → config → storage → embedding, index, policy → retrieval, portable
    → calibration, jobs, updates → health → service → mcp, host → cli, devtools
A module may import its own package or a package of a LOWER layer, never a peer or a
higher one. Imports inside `if TYPE_CHECKING:` are annotations only and do not count for
the circle check (they never run), but they must still point down or sideways within the
package.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "cpersona"
RANK = {
    "": 0, "errors": 0, "util": 0, "config": 1, "storage": 2, "embedding": 3, "index": 3, "policy": 3,
    "retrieval": 4, "portable": 4, "calibration": 5, "jobs": 5, "updates": 5, "health": 6, "service": 7, "mcp": 8,
    "host": 8,
    "cli": 9, "devtools": 9, "__main__": 10, "checkup": 10,
}
MAX_LINES = 400
_SQL = re.compile(r"\b(SELECT\b.+\bFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+"
                  r"(TABLE|INDEX|TRIGGER|VIRTUAL)|PRAGMA\s+\w+)", re.S)


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _resolve(name: str) -> str | None:
    """The cpersona module an import refers to (a submodule when it is one)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> list[tuple[str, bool]]:
    """(imported cpersona module, only under TYPE_CHECKING) for every import of `module`."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    guarded = _type_checking_lines(tree)
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            if name.split(".")[0] == "cpersona":
                target = _resolve(name)
                if target is not None and target != module:
                    found.append((target, node.lineno in guarded))
    return found


def test_every_package_has_a_layer():
    assert {_package(m) for m in MODULES} <= set(RANK), "add the new package to RANK and docs/architecture.md"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module):
    own = _package(module)
    for target, _ in _imports(module):
        other = _package(target)
        if other == own or other == "":
            continue
        assert RANK[other] < RANK[own], f"{module} imports {target}: {other} is not below {own}"


def test_no_import_circle():
    graph = {m: {t for t, guarded in _imports(m) if not guarded} for m in MODULES}
    # a package's __init__ importing its own submodules is how Python packages work, not a circle
    for m in graph:
        graph[m] = {t for t in graph[m] if not (MODULES[t].name == "__init__.py" and m.startswith(t + "."))}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in graph[m]:
            if state.get(t) == 1:
                raise AssertionError("import circle: " + " → ".join([*stack[stack.index(t):], t]))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _package(m) != "storage"))
def test_sql_and_sqlite3_only_in_storage(module):
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
            assert "sqlite3" not in names, f"{module}:{node.lineno} imports sqlite3"
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _SQL.search(node.value):
            assert not _is_code_string(node, tree), f"{module}:{node.lineno} holds SQL: {node.value[:60]!r}"


def _is_code_string(node: ast.Constant, tree: ast.AST) -> bool:
    """True unless the string is a docstring (docs may quote SQL)."""
    for parent in ast.walk(tree):
        body = getattr(parent, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and body[0].value is node:
            return False
    return True


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_stay_small(module):
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{module} has {lines} lines; split it by concern"
