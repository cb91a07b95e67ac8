"""The import floors: a module imports only from its own floor or below (docs/architecture.md, whose floor table is
checked against FLOORS here), so analysis and reports stay usable without the CLI, and lower layers never reach
back up."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tuner"
FLOORS = {  # top-level module or package of tuner -> floor
    "env": 1, "errors": 1, "files": 1, "text": 1, "versioned": 1, "legacy": 1, "cache": 1, "cost": 1, "ui": 1,
    "config": 2, "data": 2, "metrics": 2,
    "models": 3,
    "pipeline": 4, "prompts": 4, "workspace": 4, "systems": 4,
    "evaluation": 5,
    "compile": 6, "testset": 6,
    "study": 7,
    "analysis": 8,
    "reports": 9, "export": 9,
    "agent": 10,
    "cli": 11, "__main__": 11,
}


def test_every_floor_is_a_top_level_module_or_package():
    """A package inside a higher one on a lower floor is an import running back up in disguise: a fact a lower floor
    needs lives on that floor's own top-level package (the metric registry is `tuner.metrics`, not
    `tuner.evaluation.metrics`)."""
    assert [name for name in FLOORS if "." in name] == []
    on_disk = {p.stem for p in PACKAGE.glob("*.py")} | {p.name for p in PACKAGE.iterdir() if any(p.glob("*.py"))}
    assert set(FLOORS) == on_disk - {"__init__"}


def floor_of(module: str) -> int | None:
    """The floor of `tuner.x.y...`: its most specific entry in FLOORS (a leaf's own, else its package's)."""
    parts = module.split(".")[1:]
    for size in range(len(parts), 0, -1):
        if ".".join(parts[:size]) in FLOORS:
            return FLOORS[".".join(parts[:size])]
    return None


def imported_floors(path: Path) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module == "tuner":  # from tuner import cost
            names = [f"tuner.{a.name}" for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            names = []
        for name in names:
            if name.startswith("tuner.") and floor_of(name) is not None:
                found.append((name, floor_of(name)))
    return found


@pytest.mark.parametrize("path", sorted(p for p in PACKAGE.rglob("*.py") if p.parent != PACKAGE or
                                        p.stem not in ("__init__",)), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_import_only_their_floor_or_below(path):
    floor = floor_of(module_name(path))
    upward = [name for name, other in imported_floors(path) if other > floor]
    assert not upward, f"{path.relative_to(PACKAGE)} (floor {floor}) imports from above: {upward}"


def test_reading_a_study_imports_no_model_stack():
    """`tuner report` and `tuner analyze` promise seconds: they must not import DSPy, RAGAS, torch or llama.cpp."""
    import subprocess
    import sys

    code = ("import sys, tuner.reports, tuner.analysis, tuner.study.results; "
            "print(sorted(m for m in ('dspy', 'ragas', 'torch', 'llama_cpp', 'sentence_transformers') "
            "if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]", loaded


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(path: Path) -> set[str]:
    """The tuner modules a file imports anywhere (lazy imports inside functions too): `from tuner.a import b`
    names module tuner.a.b when b is a module, else tuner.a."""
    found = set()
    package = module_name(path) if path.stem == "__init__" else module_name(path).rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the file's package
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
    return {name for name in found if name in MODULES and name != module_name(path)}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The modules tied into import cycles, one sorted list per strongly connected group (Tarjan's algorithm:
    linear, where listing every simple cycle grows exponentially once one planted edge closes many)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for nxt in sorted(graph.get(module, ())):
            if nxt not in index:
                visit(nxt)
                low[module] = min(low[module], low[nxt])
            elif nxt in stack:
                low[module] = min(low[module], index[nxt])
        if low[module] == index[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def test_no_import_cycles_lazy_imports_included():
    """A lazy import hides a cycle from Python, not from the design: a module that imports upwards at call time
    still ties two layers into one. (It found backends -> weaviate -> fusion -> backends and storage -> optimize.)"""
    graph = {name: imports(path) for name, path in MODULES.items()}
    assert cycles(graph) == []


def test_the_cycle_check_sees_a_planted_lazy_cycle():
    graph = {name: imports(path) for name, path in MODULES.items()}
    planted = {**graph, "tuner.cache": graph["tuner.cache"] | {"tuner.study.storage"}}
    tied = [group for group in cycles(planted) if "tuner.cache" in group]
    assert len(tied) == 1 and "tuner.study.storage" in tied[0], cycles(planted)


def test_the_architecture_page_s_floor_table_is_this_one():
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = "<!-- floors: generated from tests/test_layers.py FLOORS -->\n"
    table = page.split(start, 1)[1].split("<!-- /floors -->")[0]
    documented = {}
    for row in table.splitlines()[2:]:
        floor, modules = row.split("|")[1:3]
        documented.update({name.strip("` "): int(floor) for name in modules.split(",")})
    assert documented == FLOORS


def test_no_cycle_between_the_top_level_rooms():
    """The house drawing: each top-level module or package one room, an arrow where one imports another. Two rooms
    of one floor may import each other without breaking the floor rule; a circle between them is still one room in
    two places (the system's answerer in `systems/` imported the contract from `evaluation/`, which imported it)."""
    def room(module: str) -> str:
        return module.split(".")[1] if "." in module else module

    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        graph.setdefault(room(name), set()).update(room(other) for other in imports(path) if room(other) != room(name))
    assert cycles(graph) == []
    assert len(graph) == len(FLOORS) + 1  # every room drawn: the floors' and the package's own __init__
