"""The package's shape, held by tests: module and function sizes, parameter counts, imports.

Limits (docs/architecture.md, read from there by the tests): a module at most 450 lines; a function body
at most 60 lines (120 for figure-drawing code in ``analysis/``); at most 8 parameters except the public
entry points; no import cycles between modules; imports go down the layers, the package root at the top;
the map of modules in docs/architecture.md is the package's files.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ignite_seg"
MAX_MODULE_LINES = 450
MAX_BODY_LINES = 60
MAX_FIGURE_BODY_LINES = 120
MAX_PARAMS = 8
ENTRY_POINTS = {"train", "tune", "lr_range_test", "sweep", "validate"}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _body_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of the body, the docstring left out."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str) and len(body) > 1:
        body = body[1:]
    return (body[-1].end_lineno or body[-1].lineno) - body[0].lineno + 1


def _n_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    return len([n for n in names if n not in ("self", "cls")])


def _is_figure_code(path: Path) -> bool:
    return path.parent.name == "analysis"


def test_modules_are_at_most_450_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in _modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_function_bodies_are_short_and_take_few_parameters():
    too_long, too_many = [], []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        limit = MAX_FIGURE_BODY_LINES if _is_figure_code(path) else MAX_BODY_LINES
        for fn in _functions(tree):
            where = f"{path.relative_to(PACKAGE)}:{fn.name}"
            if (n := _body_lines(fn)) > limit:
                too_long.append(f"{where} ({n} lines)")
            if fn.name not in ENTRY_POINTS and (k := _n_params(fn)) > MAX_PARAMS:
                too_many.append(f"{where} ({k} parameters)")
    assert not too_long and not too_many, (
        f"function bodies over the limit: {too_long}; functions with more than {MAX_PARAMS} parameters: {too_many}"
    )


def _imports(path: Path) -> set[str]:
    """The package modules ``path`` imports (at any depth of the file, lazy imports included)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("ignite_seg"):
                continue
            for alias in node.names:  # "from . import x" may name a module
                cand = f"{mod}.{alias.name}"
                found.add(cand if _exists(cand) else mod)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("ignite_seg"))
    found.discard(name)
    return {m for m in found if _exists(m)}


def _exists(mod: str) -> bool:
    rel = Path(*mod.split("."))
    root = PACKAGE.parent
    return (root / rel).with_suffix(".py").is_file() or (root / rel / "__init__.py").is_file()


def test_no_import_cycles():
    graph = {_module_name(p): _imports(p) for p in _modules()}
    # a package's __init__ re-exporting its own modules is not a cycle of the layers
    for mod, deps in graph.items():
        graph[mod] = {d for d in deps if not mod.startswith(d + ".") or d == "ignite_seg"} - {"ignite_seg"}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(mod: str, stack: list[str]) -> None:
        state[mod] = 1
        for dep in sorted(graph.get(mod, ())):
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep] if dep in stack else [mod, dep])
            elif dep not in state:
                visit(dep, stack + [dep])
        state[mod] = 2

    for mod in sorted(graph):
        if mod not in state:
            visit(mod, [mod])
    assert not cycles, f"import cycles: {cycles}"


DOC = PACKAGE.parent / "docs" / "architecture.md"


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def test_the_limits_are_the_documented_ones():
    """The sentence of docs/architecture.md that states the limits states these numbers and entry points."""
    text = " ".join(_doc().split())
    m = re.search(r"no module over (\d+) lines; no function body over (\d+) lines \((\d+) for figure-drawing "
                  r"code in `analysis/`\); no function with more than (\d+) parameters except the public entry "
                  r"points ((?:`\w+`(?:, | and )?)+)", text)
    assert m, "docs/architecture.md no longer states the limits in the sentence this test reads; restate them"
    assert tuple(int(g) for g in m.groups()[:4]) == (MAX_MODULE_LINES, MAX_BODY_LINES, MAX_FIGURE_BODY_LINES,
                                                      MAX_PARAMS)
    assert set(re.findall(r"`(\w+)`", m.group(5))) == ENTRY_POINTS


def _documented_layers() -> dict[str, int | None]:
    """The layers block of docs/architecture.md: module or package name -> its layer (``None``: a module of
    a package, which takes the package's layer). Several names may share a line (``a.py b.py  what``)."""
    block = _doc().split("## The layers", 1)[1].split("```", 2)[1]
    found: dict[str, int | None] = {}
    package = ""
    for line in block.splitlines()[1:]:
        if not line.strip():
            continue
        nested = line.startswith("  ")
        if line.startswith(" " * 20):  # a continuation of the description above
            continue
        names = []
        for word in line.split():
            if not re.fullmatch(r"[\w]+(\.py|/)", word):
                break
            names.append(word)
        assert names, f"docs/architecture.md: a line of the layers block names no module: {line!r}"
        layer = re.search(r"layers? ([\d, ]+)$", line.rstrip())
        numbers = [int(n) for n in re.findall(r"\d+", layer.group(1))] if layer else []
        for i, word in enumerate(names):
            if nested:
                found[f"ignite_seg.{package}.{word.removesuffix('.py')}"] = None
                continue
            package = word.removesuffix("/") if word.endswith("/") else package
            assert numbers, f"docs/architecture.md: {word} has no layer ({line!r})"
            found[f"ignite_seg.{word.removesuffix('.py').removesuffix('/')}"] = numbers[min(i, len(numbers) - 1)]
    return found


def test_the_documented_modules_are_the_files():
    """Every module of the package is on docs/architecture.md's map, and nothing else is."""
    documented = set(_documented_layers())
    files = {_module_name(p) for p in _modules() if p.name != "__init__.py"}
    files |= {_module_name(p) for p in _modules() if p.name == "__init__.py" and p.parent != PACKAGE}
    files.discard("ignite_seg")
    assert documented - files == set(), f"docs/architecture.md lists modules that do not exist: {sorted(documented - files)}"
    assert files - documented == set(), f"modules missing from docs/architecture.md: {sorted(files - documented)}"


def test_the_documented_layers_are_the_tested_ones():
    documented = {name: layer for name, layer in _documented_layers().items() if layer is not None}
    assert documented == {k: v for k, v in LAYERS.items() if k != "ignite_seg"}


#: The layers, bottom up (docs/architecture.md); a module imports only from lower layers or its own package.
#: The package root re-exports the public API from every layer: it is the top.
LAYERS = {
    "ignite_seg._version": 0,
    "ignite_seg._lazy": 0,
    "ignite_seg.exceptions": 0,
    "ignite_seg.smoothing": 0,
    "ignite_seg.config": 1,
    "ignite_seg.storage": 2,
    "ignite_seg.runtime": 2,
    "ignite_seg.engine": 3,
    "ignite_seg.tuning": 4,
    "ignite_seg.analysis": 4,
    "ignite_seg.run_config": 4,
    "ignite_seg.run_plan": 5,
    "ignite_seg.run_result": 4,
    "ignite_seg.api": 6,
    "ignite_seg.loading": 5,
    "ignite_seg.reanalyze": 6,
    "ignite_seg.tuner": 7,
    "ignite_seg.trainer": 7,
    "ignite_seg.param_sweep": 7,
    "ignite_seg.utils": 1,
    "ignite_seg.hyperparams": 2,
    "ignite_seg.helper": 7,
    "ignite_seg.gen_sweep": 8,
    "ignite_seg.export": 6,
    "ignite_seg": 9,
}


def _group(mod: str) -> str | None:
    """The layer group of ``mod``: the longest name of :data:`LAYERS` it is or lies in (the root: only itself)."""
    return max((g for g in LAYERS if mod == g or (g != "ignite_seg" and mod.startswith(g + "."))), key=len,
               default=None)


def _upward_imports(graph: dict[str, set[str]]) -> tuple[list[str], list[str]]:
    """``(upward, unplaced)``: the imports of ``graph`` that do not go down the layers, the modules in none."""
    upward, unplaced = [], []
    for mod, deps in sorted(graph.items()):
        group = _group(mod)
        if group is None:
            unplaced.append(mod)
            continue
        for dep in sorted(deps):
            dep_group = _group(dep)
            if dep_group == group and (dep != "ignite_seg" or mod == "ignite_seg"):  # its own package
                continue
            if dep_group is None or LAYERS[dep_group] >= LAYERS[group]:
                upward.append(f"{mod} -> {dep}")
    return upward, unplaced


def test_no_upward_imports_between_the_layers():
    """Each module imports only from lower layers or its own package; the package root is the top layer,
    so nothing below imports from it (``from . import __version__`` in a module is an upward import)."""
    upward, unplaced = _upward_imports({_module_name(p): _imports(p) for p in _modules()})
    assert not unplaced, f"modules in no layer (add them to LAYERS and docs/architecture.md): {unplaced}"
    assert not upward, f"imports that do not go down the layers: {upward}"


def test_the_layer_check_sees_an_import_from_the_root_and_one_sideways():
    """The check itself, on hand-made graphs: the root, an equal layer and an unknown module are refused."""
    assert _upward_imports({"ignite_seg.run_plan": {"ignite_seg"}})[0] == ["ignite_seg.run_plan -> ignite_seg"]
    assert _upward_imports({"ignite_seg.analysis.x": {"ignite_seg.tuning.y"}})[0] == \
        ["ignite_seg.analysis.x -> ignite_seg.tuning.y"]
    assert _upward_imports({"ignite_seg.config.x": {"ignite_seg.exceptions", "ignite_seg.config.y"}})[0] == []
    assert _upward_imports({"ignite_seg.newthing": set()})[1] == ["ignite_seg.newthing"]
    assert _upward_imports({"ignite_seg": {"ignite_seg.api", "ignite_seg.analysis"}}) == ([], [])


def test_importing_the_package_imports_neither_torch_nor_matplotlib():
    """``import ignite_seg`` stays cheap (the docstring's promise): torch comes with the first train()."""
    import subprocess
    import sys

    code = "import sys, ignite_seg; print(sorted(m for m in ('torch', 'matplotlib', 'ignite') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.parametrize("package", ["config", "storage", "runtime", "engine", "tuning", "analysis", "param_sweep",
                                     "gen_sweep"])
def test_each_layer_names_what_it_exposes(package):
    """Each sub-package's ``__init__`` has an ``__all__``, and every name in it resolves (lazily or not)."""
    import importlib

    mod = importlib.import_module(f"ignite_seg.{package}")
    assert mod.__all__, f"ignite_seg.{package}.__init__ names nothing in __all__"
    missing = [name for name in mod.__all__ if not hasattr(mod, name)]
    assert not missing, f"ignite_seg.{package}.__all__ names what it does not have: {missing}"
