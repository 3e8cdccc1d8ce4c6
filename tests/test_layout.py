"""The house's layout, checked from the source (ast; nothing imported):

- sim's modules import each other without a circle, counting imports inside functions too;
- sim is the simulation core: it imports no app layer (ui, pages, figures), no server reader
  (servers), no engine, no Streamlit or torch; only its command line (sim/__main__.py) may;
- the core (the modules directly in sim/) does not import its lessons (sim.lessons);
- no source file outside tests/ and bench/ is over 900 lines, no class over 400.
"""
from __future__ import annotations

import ast
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIM = ROOT / "sim"
MAX_FILE_LINES, MAX_CLASS_LINES = 900, 400
FORBIDDEN = {"servers", "engine", "figures", "ui", "pages", "streamlit", "torch"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sim_modules() -> dict[str, tuple[Path, ast.Module]]:
    return {module_name(p): (p, ast.parse(p.read_text(), str(p))) for p in sorted(SIM.rglob("*.py"))}


def imports(name: str, path: Path, tree: ast.Module) -> list[tuple[str, ...]]:
    """What `tree` imports, at any depth (a function's imports too): per imported name, the
    absolute module names it may be, most specific first (`from pkg import x`: pkg.x or pkg)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name,) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            out += [(f"{base}.{a.name}", base) for a in node.names]
    return out


def import_graph() -> dict[str, set[str]]:
    """sim's modules -> the sim modules each imports. A package's own __init__, which Python runs
    before any of its modules, is an edge only where it is imported by name."""
    mods = sim_modules()
    graph = {}
    for name, (path, tree) in mods.items():
        edges = set()
        for names in imports(name, path, tree):
            target = next((n for n in names if n in mods), names[-1])
            while target and target not in mods:
                target = target.rpartition(".")[0]  # `import sim.a.b.name`: the module sim.a.b
            if target:
                edges.add(target)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of `graph` as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(n):
        state[n] = 1
        path.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return path[path.index(m):] + [m]
            if m not in state and (found := visit(m)):
                return found
        state[n] = 2
        path.pop()
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_graph_sees_imports_inside_functions():
    # sim/__main__.py imports the lesson inside its command function only
    assert "sim.lessons.lesson" in import_graph()["sim.__main__"]


def test_sim_has_no_import_circle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle in sim: " + " -> ".join(cycle)


def test_sim_imports_no_app_layer():
    bad = []
    for name, (path, tree) in sim_modules().items():
        if name == "sim.__main__":
            continue
        for names in imports(name, path, tree):
            if names[-1].partition(".")[0] in FORBIDDEN:
                bad.append(f"{path.relative_to(ROOT)} imports {names[-1]}")
    assert not bad, "\n".join(sorted(set(bad)))


def test_the_core_does_not_import_its_lessons():
    graph = import_graph()
    bad = [f"{n} imports {m}" for n, ms in graph.items() if n.count(".") == 1 and n != "sim.__main__"
           for m in sorted(ms) if m == "sim.lessons" or m.startswith("sim.lessons.")]
    assert not bad, "\n".join(bad)


def source_files():
    """Every .py of the project but the tests', the benchmarks' and hidden folders' (.venv*, .git)."""
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__"
                         and not (Path(top) == ROOT and d in ("tests", "bench")))
        yield from (Path(top) / f for f in sorted(files) if f.endswith(".py"))


def test_no_file_or_class_is_too_long():
    bad = []
    for path in source_files():
        text = path.read_text()
        rel = path.relative_to(ROOT)
        if (n := len(text.splitlines())) > MAX_FILE_LINES:
            bad.append(f"{rel}: {n} lines (at most {MAX_FILE_LINES})")
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.ClassDef) and (n := node.end_lineno - node.lineno + 1) > MAX_CLASS_LINES:
                bad.append(f"{rel}: class {node.name} is {n} lines (at most {MAX_CLASS_LINES})")
    assert not bad, "\n".join(bad)


def test_the_vllm_recorder_imports_only_the_standard_library_and_vllm():
    """It runs inside a user's vLLM server: no pandas, numpy or Streamlit there. Every module the
    recorder's import passes through (the packages' __init__s, the recorder, what it imports
    from its own package) is checked, at any depth."""
    import sys

    todo, seen, bad = ["servers", "servers.vllm", "servers.vllm.recorder"], set(), []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = ROOT.joinpath(*name.split("."))
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        tree = ast.parse(path.read_text(), str(path))
        for names in imports(name, path, tree):
            top = names[-1].split(".")[0]
            if names[-1].startswith("servers"):
                own = next(n for n in names if ROOT.joinpath(*n.split(".")).with_suffix(".py").exists()
                           or ROOT.joinpath(*n.split(".")).is_dir())
                todo.append(own)
            elif top not in sys.stdlib_module_names and top != "vllm":
                bad.append(f"{name} imports {names[-1]}")
    assert seen >= {"servers", "servers.vllm", "servers.vllm.recorder", "servers.vllm.format"}
    assert not bad, bad
