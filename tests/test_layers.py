"""The layout holds: imports point down the layers only, no import circle, SQL and `sqlite3`
only in the storage layer, and no module grows past the size a reader can hold.

The layers, bottom to top (docs/architecture.md):
    errors, util → config → storage → embedding, index, policy → retrieval, portable
    → calibration, jobs, updates → health → service → mcp, host → cli, devtools
A module may import its own package or a package of a LOWER layer, never a peer or a
higher one. No two files import each other, directly or round a circle — imports inside
`if TYPE_CHECKING:` included: an annotation-only import couples the files as much (a type
both need lives in the lower one, often as a Protocol). Above storage/, the storage classes
are named through its Protocols (`storage.Database`, `storage.Session`: storage/ports/),
never the SQLite or PostgreSQL classes.
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


def _resolve(name: str) -> str | None:
    """The cpersona module an import refers to (a submodule when it is one)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> list[str]:
    """The cpersona module of every import of `module` (wherever it stands: at the top, in a
    function, under TYPE_CHECKING)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
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
                    found.append(target)
    return found


def test_every_package_has_a_layer():
    assert {_package(m) for m in MODULES} <= set(RANK), "add the new package to RANK and docs/architecture.md"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module):
    own = _package(module)
    for target in _imports(module):
        other = _package(target)
        if other == own or other == "":
            continue
        assert RANK[other] < RANK[own], f"{module} imports {target}: {other} is not below {own}"


def test_no_import_circle():
    graph = {m: set(_imports(m)) for m in MODULES}
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


#: The storage classes (SQLite's and PostgreSQL's); above storage/ they are named through the Protocols.
_STORAGE_CLASS = re.compile(r"(Pg)?(Database|Session)|\w+Repo")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if RANK[_package(m)] > RANK["storage"]))
def test_layers_above_storage_name_its_protocols(module):
    for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cpersona.storage.") \
                and not node.module.startswith("cpersona.storage.ports"):
            named = [a.name for a in node.names if _STORAGE_CLASS.fullmatch(a.name)]
            assert not named, f"{module}:{node.lineno} imports {named} from {node.module}: use cpersona.storage's Protocols"


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
