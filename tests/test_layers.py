"""The house keeps its shape (docs/architecture.md): data flows one way, so no room
imports a room above it, and no import runs in a circle. Every import counts, also
one inside a function: a lazy import is still a dependency."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: What each room must never import (docs/architecture.md's table).
FORBIDDEN = {
    "harness.rfc": {"harness.schedule", "harness.endpoints", "harness.testbed", "harness.virtual", "harness.run",
                    "harness.observe", "harness.model", "harness.verdict", "harness.report"},
    "harness.schedule": {"harness.endpoints", "harness.testbed", "harness.virtual", "harness.run",
                         "harness.observe", "harness.model", "harness.verdict", "harness.report"},
    "harness.endpoints": {"harness.testbed", "harness.virtual", "harness.run", "harness.observe", "harness.model",
                          "harness.verdict", "harness.report"},
    "harness.testbed": {"harness.virtual", "harness.run", "harness.observe", "harness.model", "harness.verdict",
                        "harness.report"},
    "harness.virtual": {"harness.run", "harness.observe", "harness.model", "harness.verdict", "harness.report"},
    "harness.run": {"harness.observe", "harness.model", "harness.verdict", "harness.report"},
    "harness.observe": {"harness.testbed", "harness.endpoints", "harness.virtual", "harness.run", "harness.model",
                        "harness.verdict", "harness.report"},
    "harness.model": {"harness.testbed", "harness.endpoints", "harness.virtual", "harness.run", "harness.verdict",
                      "harness.report"},
    "harness.verdict": {"harness.testbed", "harness.endpoints", "harness.report"},
    # Results sit above the verdict (ledgers, deviations, the catalogue) and below the
    # report, which renders them: nothing in the verdict's rooms reads results back.
    "harness.results": {"harness.testbed", "harness.endpoints", "harness.virtual", "harness.report"},
    # A reproduction runs transfers and keeps their figures; the report renders them.
    "harness.reproduce": {"harness.model", "harness.verdict", "harness.results", "harness.report"},
    "harness.report": {"harness.testbed", "harness.endpoints", "harness.virtual", "harness.run", "harness.verdict"},
    # Releases compared: it runs the reference transfers (through harness.reproduce)
    # and the properties (as a pytest process, reading their results back), and
    # draws on the report's state counting; it judges nothing itself.
    "harness.versions": {"harness.model", "harness.verdict"},
    # The properties speak the run's record, the observation and the RFCs' constants.
    "properties": {"harness.endpoints", "harness.testbed", "harness.virtual", "harness.cli", "harness.pytest_plugin"},
}
#: The rooms below harness.results, which must never import it.
for _room_below in ("harness.rfc", "harness.schedule", "harness.endpoints", "harness.testbed", "harness.virtual",
                    "harness.run", "harness.observe", "harness.model", "harness.verdict", "properties"):
    FORBIDDEN[_room_below] = FORBIDDEN[_room_below] | {"harness.results"}
#: The top room, which only the entry points import.
for _room in list(FORBIDDEN):
    if _room != "harness.versions":
        FORBIDDEN[_room] = FORBIDDEN[_room] | {"harness.versions"}
#: Above every room, and imported by none of them (properties/ is one, with its own rules).
ENTRY_POINTS = {"harness.cli", "harness.pytest_plugin"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, bool, int]]:
    """(module imported, at module level, line) for every import in `path`, also
    the names of a `from X import Y` where Y is a module of the project."""
    tree = ast.parse(path.read_text(), filename=str(path))
    top = {id(n) for n in tree.body}
    guarded = {id(n) for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
               for n in ast.walk(n) if isinstance(n, (ast.Import, ast.ImportFrom))}
    out = []
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, id(node) in top, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from package import module` depends on the module; other names on the package.
            subs = [f"{node.module}.{a.name}" for a in node.names if _is_module(f"{node.module}.{a.name}")]
            if len(subs) < len(node.names):
                out.append((node.module, id(node) in top, node.lineno))
            out += [(s, id(node) in top, node.lineno) for s in subs]
    return out


def _is_module(dotted: str) -> bool:
    path = ROOT / Path(*dotted.split("."))
    return path.with_suffix(".py").exists() or path.is_dir()


def _sources() -> list[Path]:
    skip = {".venv", "target", "__pycache__"}
    files = [p for p in (ROOT / "harness").rglob("*.py") if not skip & set(p.parts)]
    # The endpoints' own programs run in other processes (and other venvs): not the harness.
    files = [p for p in files if not (p.parent != ROOT / "harness" / "endpoints"
                                      and (ROOT / "harness" / "endpoints") in p.parents)]
    return files + sorted((ROOT / "properties").glob("*.py"))


def _room(module: str) -> str | None:
    for room in sorted((*FORBIDDEN, *ENTRY_POINTS), key=len, reverse=True):
        if module == room or module.startswith(room + "."):
            return room
    return None


SOURCES = _sources()


def test_the_rooms_are_where_the_table_says():
    """A room in the table that no longer exists would make its rules pass on nothing."""
    for room in FORBIDDEN:
        assert (ROOT / Path(*room.split("."))).is_dir(), f"{room}: no such package; update FORBIDDEN and docs/architecture.md"
    assert len(SOURCES) > 50


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_no_import_runs_back_up(path):
    here = _room(_module_name(path))
    bad = []
    for module, _, line in _imports(path):
        there = _room(module)
        if there is None or there == here:
            continue
        if there in ENTRY_POINTS or there in FORBIDDEN.get(here, ()) or (there == "properties" and here != there):
            bad.append(f"{path.relative_to(ROOT)}:{line} imports {module} ({here} must not import {there})")
    assert not bad, "\n".join(bad)


def test_harness_top_holds_packages_and_two_entry_points():
    loose = sorted(p.name for p in (ROOT / "harness").glob("*.py") if p.name != "__init__.py")
    assert loose == ["cli.py", "pytest_plugin.py"], loose


def test_no_import_circle_between_modules():
    """Module-level imports only (a lazy import inside a function cannot loop at import time)."""
    graph: dict[str, set[str]] = defaultdict(set)
    names = {_module_name(p): p for p in SOURCES}
    for name, path in names.items():
        for module, at_top, _ in _imports(path):
            if at_top and module in names and module != name:
                graph[name].add(module)
    # A package's __init__ is imported on the way to its modules: a module importing
    # its own package is not a circle unless the package imports it back.
    seen, stack, circles = set(), [], []

    def visit(n: str) -> None:
        if n in stack:
            circles.append(stack[stack.index(n):] + [n])
            return
        if n in seen:
            return
        seen.add(n)
        stack.append(n)
        for m in sorted(graph[n]):
            visit(m)
        stack.pop()

    for n in sorted(names):
        visit(n)
    assert not circles, "\n".join(" → ".join(c) for c in circles)


def test_no_property_or_analysis_reads_a_testbed_constant():
    """Issue 24: the transfer's flow comes from the run, never from a port constant."""
    for path in [*sorted((ROOT / "properties").glob("*.py")), *sorted((ROOT / "harness" / "verdict").glob("*.py"))]:
        text = path.read_text()
        for name in ("SERVER_PORT", "QIR_PORT", "SERVER_IP", "CLIENT_IP", "SERVER_ADDR", "CLIENT_ADDR", "4433"):
            assert name not in text, f"{path.relative_to(ROOT)} names {name}: take the flow from obs.transfer_flow"
