"""The house rules a review keeps true, checked on the tree (issue 36): rooms of a size a reader
takes in, no import cycle, reactions from the box alone, and every module's tests found from its
name."""

import ast
import re
from pathlib import Path

from laguna_kit import KIT_ROOT

CODE = [KIT_ROOT / "laguna_kit", KIT_ROOT / "tasks"]
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 100


def modules(*roots: Path) -> list[Path]:
    return sorted(p for root in roots for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def name_of(path: Path) -> str:
    rel = path.relative_to(KIT_ROOT).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_module_over_400_lines_and_no_function_over_100():
    long_modules, long_functions = [], []
    for path in modules(*CODE):
        text = path.read_text()
        if text.count("\n") > MAX_MODULE_LINES:
            long_modules.append((name_of(path), text.count("\n")))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append((name_of(path), node.name, length))
    assert long_modules == [] and long_functions == [], (long_modules, long_functions)


def imports_of(path: Path, package: str) -> set[str]:
    """The laguna_kit modules `path` imports, at any depth (function-level imports too)."""
    me = name_of(path)
    base = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith(package)}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base[: len(base) - node.level + 1]
                mod = ".".join(parts + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith(package):
                continue
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
    return out


def import_graph() -> dict[str, set[str]]:
    files = modules(KIT_ROOT / "laguna_kit")
    known = {name_of(p) for p in files}
    return {
        name_of(p): {m for m in imports_of(p, "laguna_kit") if m in known and m != name_of(p)}
        for p in files
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's), a package's own
    __init__ importing its modules excepted."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w.startswith(v + "."):
                continue  # a package importing its own modules is no cycle
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_function_level_imports_included():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_an_operation_module_uses_no_other_domains_operations():
    """Operations of one domain do not reach into another's; the shared idioms (files, systemd)
    are for everyone, as pyinfra's operations/util is."""
    shared = {"files", "systemd", "secrets"}
    found = []
    for path in modules(KIT_ROOT / "laguna_kit" / "operations"):
        for mod in imports_of(path, "laguna_kit.operations"):
            parts = mod.split(".")
            if len(parts) >= 3 and parts[2] not in shared and parts[2] != path.stem:
                found.append((path.stem, mod))
    assert found == [], found


def test_no_task_file_reloads_systemd_or_reacts_to_an_earlier_operation():
    """A reaction comes from the box's state (operations/systemd.py), never from a task's
    `_if=<operation>.did_change`, so a run cut in between loses none."""
    for path in modules(KIT_ROOT / "tasks"):
        text = path.read_text()
        assert "daemon-reload" not in text, path.name
        assert not re.search(r"_if=\w+\.did_change", text), path.name


def test_the_box_tools_that_grew_are_packages():
    for tool in ("fetch", "release", "gate"):
        assert (KIT_ROOT / "laguna_kit" / "boxtools" / tool / "__init__.py").exists(), tool
        assert not (KIT_ROOT / "laguna_kit" / "boxtools" / f"{tool}.py").exists(), tool


def fixture_modules(kind: str) -> set[str]:
    root = KIT_ROOT / "tests" / "unit" / kind
    return {p.name.split(".", 1)[0] for p in root.iterdir() if p.is_dir() and "." in p.name}


def test_every_module_has_tests_found_from_its_name():
    """laguna_kit/<package>/<module>.py -> tests/unit/<package>/test_<module>.py (a fact or
    operation module: its JSON fixtures, tests/unit/facts|operations/<module>.<Name>/)."""
    missing = []
    for path in modules(KIT_ROOT / "laguna_kit"):
        if path.name == "__init__.py":
            continue
        rel = path.relative_to(KIT_ROOT / "laguna_kit")
        package, module = rel.parent, rel.stem
        test = KIT_ROOT / "tests" / "unit" / package / f"test_{module}.py"
        by_fixture = str(package) in ("facts", "operations") and module in fixture_modules(
            str(package)
        )
        if not test.exists() and not by_fixture:
            missing.append(str(rel))
    assert missing == [], missing


def test_box_paths_are_spelled_in_layout_alone():
    spelled = []
    for path in modules(*CODE):
        if path.name == "layout.py":
            continue
        for line in path.read_text().splitlines():
            code = line.split("#", 1)[0]
            if re.search(r"[\"']/run/laguna-kit", code):
                spelled.append((name_of(path), line.strip()))
    assert spelled == [], spelled
