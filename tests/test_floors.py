"""The package's floors, drawn from its imports: the engine (core, models, runs, sinks,
patching, discovery, graph, report, training) below the studies (`studies/`: each study a room
of its own) below the shells (`cli/`, the notebook API `circuit.py`). Every import (function
bodies and TYPE_CHECKING blocks too) between two rooms runs one way: no circle, so none runs
back up."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

PACKAGE = "attn_sink_circuits"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE
MAX_TOP_ENTRIES = 20
"""Modules and packages at the package top (27 before the studies had their floor)."""
ABOVE_THE_ENGINE = ("studies", "cli", "circuit")
SHELLS = ("cli", "circuit")
BACK_IMPORTS_PENDING = {("runs", "models"), ("discovery", "studies.ioi")}
"""(room, room it imports) running back up, to be removed: runs' provenance and audit read a
model's identity and the registry (function-level imports); the models write through runs.
`judge_saved` and `discovery.recorded` make a task's pairs themselves (IOI's are a study's)."""


def room(rel: tuple[str, ...]) -> str:
    """The room of a file (its path under the package): a study's package, the studies'
    shared modules ("studies"), or an entry of the package top."""
    if rel[0] == "studies" and len(rel) > 2:
        return f"studies.{rel[1]}"
    return rel[0].removesuffix(".py")


def target_room(module: str) -> str | None:
    """The room a dotted module name of the package lives in (None: not the package's)."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    parts = parts[1:] or ["__init__"]
    for k in range(len(parts), 0, -1):
        path = ROOT.joinpath(*parts[:k])
        if path.is_dir():
            return room((*parts[:k], "__init__.py"))
        if path.with_suffix(".py").is_file():
            return room((*parts[: k - 1], parts[k - 1] + ".py"))
    raise AssertionError(f"{module} is not a module of the package")


def imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{path}: a relative import"
            out.add(node.module)
    return out


def room_imports(pending: bool = False) -> dict[str, dict[str, set[str]]]:
    """room -> {room it imports -> the files that do}; `BACK_IMPORTS_PENDING` left out unless
    `pending`."""
    graph: dict[str, dict[str, set[str]]] = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).parts
        here = room(rel)
        edges = graph.setdefault(here, {})
        for module in imported(path):
            there = target_room(module)
            if there is None or there == here:
                continue
            if pending or (here, there) not in BACK_IMPORTS_PENDING:
                edges.setdefault(there, set()).add("/".join(rel))
    return graph


def test_no_import_runs_back_up():
    graph = room_imports()
    try:
        order = list(TopologicalSorter({r: set(e) for r, e in graph.items()}).static_order())
    except CycleError as err:
        rooms = err.args[1]  # each imported by the next
        pairs = zip(rooms[1:], rooms, strict=False)
        steps = [f"{a} imports {b} ({sorted(graph[a][b])})" for a, b in pairs]
        raise AssertionError("rooms in a circle: " + "; ".join(steps)) from None
    assert {"studies.p0", "studies.secondary", "runs", "core"} <= set(order)


def test_the_studies_sit_above_the_engine():
    for here, edges in room_imports().items():
        if here.split(".")[0] in ABOVE_THE_ENGINE or here == "__init__":
            continue
        up = {r: sorted(f) for r, f in edges.items() if r.split(".")[0] in ABOVE_THE_ENGINE}
        assert not up, f"{here} (the engine) imports {up}"


def test_the_studies_never_import_a_shell():
    for here, edges in room_imports().items():
        if here.split(".")[0] == "studies":
            up = {r: sorted(f) for r, f in edges.items() if r in SHELLS}
            assert not up, f"{here} imports {up}"


def test_the_run_machinery_sits_on_the_vocabulary_floor():
    # runs (atomic writes, provenance, audit, steps) is below every room that writes a file.
    allowed = {"core", "__init__"}
    bad = {r: sorted(f) for r, f in room_imports()["runs"].items() if r not in allowed}
    assert not bad, f"runs imports {bad}"


def test_the_package_top_stays_small():
    top = sorted(p.name for p in ROOT.iterdir() if p.name != "__pycache__")
    assert len(top) <= MAX_TOP_ENTRIES, f"{len(top)} entries at the package top: {top}"
    assert not (ROOT.parent / "circuits").exists(), "no `circuits` package: its name is taken"


def test_each_pending_back_import_is_still_there():
    # Once one is gone, take it off the list, so that it cannot come back unseen.
    graph = room_imports(pending=True)
    gone = [pair for pair in BACK_IMPORTS_PENDING if pair[1] not in graph.get(pair[0], {})]
    assert not gone, f"no longer imported, remove from BACK_IMPORTS_PENDING: {gone}"
