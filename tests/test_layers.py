"""The package's layers (``matcomp/__init__.py``): every module imports only its own layer or those
before it, so that, e.g., training never depends on an analysis."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lib" / "matcomp"
ORDER = ["core", "models", "runs", "analysis", "book", "top"]
TOP = {"cli", "bench", "levers", "remote", "main", "__main__"}  # the commands


def layer(module: str) -> str:
    """The layer of a dotted module name inside ``matcomp``."""
    parts = module.split(".")[1:]
    if not parts:
        return "core"  # the package's lazy shortcuts
    if parts[0] in ORDER:
        return parts[0]
    return "top" if parts[0] in TOP else "core"


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(p for p in rel.parts if p != "__init__")
        out[name] = path
    return out


def imported(path: Path) -> set[str]:
    """Every ``matcomp`` module ``path`` imports, at the top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("matcomp"):
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names if a.name.startswith("matcomp")}
    return names


def test_every_module_has_a_layer_and_its_folder_says_which():
    found = modules()
    assert {layer(m) for m in found} == set(ORDER)
    assert "matcomp.runs.training" in found and layer("matcomp.runs.training") == "runs"


@pytest.mark.parametrize("module", sorted(m for m in modules() if m != "matcomp"))
def test_imports_go_only_to_the_same_or_a_lower_layer(module):
    own = ORDER.index(layer(module))
    upward = sorted(m for m in imported(modules()[module]) if ORDER.index(layer(m)) > own)
    assert not upward, f"{module} ({layer(module)}) imports higher layers: {upward}"


def test_the_check_catches_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from matcomp.analysis.heads import head_scores\n")
    assert ORDER.index(layer(next(iter(imported(bad))))) > ORDER.index(layer("matcomp.runs.training"))


TRAINING = {("matcomp.runs.store", "get_or_train"), ("matcomp.runs.training", "train"),
            ("matcomp.runs.parallel", "train_all")}


def training_imports(path: Path) -> set[tuple[str, str]]:
    """The entry points that train a run which ``path`` imports."""
    return {(node.module, a.name) for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) for a in node.names if (node.module, a.name) in TRAINING}


@pytest.mark.parametrize("module", sorted(m for m in modules() if layer(m) == "analysis"))
def test_analyses_take_runs_and_train_none(module):
    """Only the plan, ``prepare`` and the chapters' openings (``book.chapter``) train: an analysis that
    trained would start hours of work that no chapter announces."""
    assert not training_imports(modules()[module]), f"{module} imports {sorted(training_imports(modules()[module]))}"


def test_the_check_catches_an_analysis_that_trains(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(cfg):\n    from matcomp.runs.store import get_or_train, runs_root\n"
                   "    return get_or_train(cfg)\n")
    assert training_imports(bad) == {("matcomp.runs.store", "get_or_train")}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph`` (module -> the modules it imports), each once, as a path back to its start."""
    cycles, done, path = [], set(), []

    def visit(module: str) -> None:
        if module in path:
            cycle = path[path.index(module):]
            first = cycle.index(min(cycle))
            cycle = cycle[first:] + cycle[:first]
            if cycle not in cycles:
                cycles.append(cycle)
            return
        if module in done:
            return
        path.append(module)
        for other in sorted(graph.get(module, ())):
            visit(other)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)
    return cycles


def test_no_module_imports_one_that_imports_it_back():
    """At the top or inside a function: a circle means two modules are one concept split in two."""
    found = modules()
    graph = {name: {m for m in imported(path) if m in found and m != name} for name, path in found.items()}
    assert import_cycles(graph) == []


def test_the_circle_check_catches_a_circle():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("module", ["matcomp.cli", "matcomp.remote"])
def test_the_run_commands_build_runs_without_the_book(module):
    assert not {m for m in imported(modules()[module]) if m.startswith("matcomp.book")}


def test_no_module_is_over_400_lines():
    """A module longer than this holds more than one concept: split it by what it is for."""
    long = {str(path.relative_to(PACKAGE)): lines for path in PACKAGE.rglob("*.py")
            if (lines := len(path.read_text().splitlines())) > 400}
    assert not long, f"modules over 400 lines: {long}"
