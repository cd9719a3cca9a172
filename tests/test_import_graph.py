"""The package's import graph has no circle (issues 15 and 26).

An AST walk over agentmemory/: every ``import`` and ``from ... import`` of an
agentmemory module, at module level or inside a function, is an edge, and so is every
module named by a string to ``require(...)``, ``import_module(...)`` or
``importlib.import_module(...)`` (a dynamic import); only imports under
``if TYPE_CHECKING:`` are not (they never run). A circle through a function-level or
dynamic import is still a circle: it is only hidden until the function runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "agentmemory"

#: Circles being removed elsewhere, each named by the change that removes it.
KNOWN: set[frozenset[str]] = set()  # no circle is accepted


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


#: Functions that import the modules named by their string arguments.
DYNAMIC_IMPORTS = {"require", "import_module"}


def _call_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def imported(name: str, tree: ast.Module, known: set[str]) -> set[str]:
    """The agentmemory modules ``name`` imports, wherever in it the import runs."""
    package = name if (PACKAGE.parent / name.replace(".", "/") / "__init__.py").exists() else (
        name.rpartition(".")[0]
    )
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and is_type_checking(node.test):
            for statement in node.orelse:
                visit(statement)
            return
        if isinstance(node, ast.Call) and _call_name(node.func) in DYNAMIC_IMPORTS:
            found.update(
                arg.value for arg in node.args
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
            )
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                # `from agentmemory import signals` imports a module; `from agentmemory
                # import __version__` imports the package.
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in known else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {module for module in found if module in known and module != name}


def import_graph() -> dict[str, set[str]]:
    paths = modules()
    known = set(paths)
    graph = {}
    for name, path in paths.items():
        tree = ast.parse(path.read_text(), str(path))
        if name == "agentmemory":
            # The root package's lazy re-exports run only when a name is looked up on it
            # (`agentmemory.recall`), never when a module imports `__version__` from it.
            tree.body = [node for node in tree.body if not isinstance(node, ast.FunctionDef)]
        graph[name] = imported(name, tree, known)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def test_no_import_circle() -> None:
    found = [c for c in circles(import_graph()) if frozenset(c) not in KNOWN]
    assert found == []


def test_the_walker_sees_function_level_imports_and_circles() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from agentmemory import b\n"
        "def f():\n    from agentmemory.c import x\n"
    )
    known = {"agentmemory.a", "agentmemory.b", "agentmemory.c"}
    assert imported("agentmemory.a", tree, known) == {"agentmemory.c"}
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


def test_the_walker_follows_dynamic_imports_into_a_planted_circle() -> None:
    """A module that loads another by name (`extras.require`, `import_module`) imports it:
    the circle services -> background -> tasks -> services was hidden that way."""
    known = {"agentmemory.a", "agentmemory.b", "agentmemory.c", "agentmemory.d"}
    planted = {
        "agentmemory.a": "def f():\n    return require('Feature', 'celery', 'agentmemory.b')\n",
        "agentmemory.b": "import importlib\nimportlib.import_module('agentmemory.c')\n",
        "agentmemory.c": "from importlib import import_module\nimport_module('agentmemory.a')\n",
        "agentmemory.d": "name = 'agentmemory.a'\n",  # a string alone imports nothing
    }
    graph = {name: imported(name, ast.parse(code), known) for name, code in planted.items()}
    assert graph == {"agentmemory.a": {"agentmemory.b"}, "agentmemory.b": {"agentmemory.c"},
                     "agentmemory.c": {"agentmemory.a"}, "agentmemory.d": set()}
    assert circles(graph) == [["agentmemory.a", "agentmemory.b", "agentmemory.c"]]


def test_no_function_level_import_that_a_module_level_one_covers() -> None:
    """A module imported at the top needs no second import inside a function (that one
    only hides where the dependency is)."""
    again = []
    for name, path in modules().items():
        tree = ast.parse(path.read_text(), str(path))
        top = {node.module for node in tree.body if isinstance(node, ast.ImportFrom)} | {
            alias.name for node in tree.body if isinstance(node, ast.Import)
            for alias in node.names
        }
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                names = ([node.module] if isinstance(node, ast.ImportFrom) else
                         [alias.name for alias in node.names] if isinstance(node, ast.Import)
                         else [])
                again += [f"{name}:{node.lineno} {module}" for module in names if module in top]
    assert again == []


#: The most lines a module of agentmemory/ may hold (migrations aside): one job each.
MODULE_LINES = 300


def test_no_module_over_300_lines() -> None:
    sizes = {
        str(path.relative_to(PACKAGE)): len(path.read_text().splitlines())
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] != "migrations"
    }
    assert "services/recalls.py" in sizes and "models/entries.py" in sizes
    assert {name: size for name, size in sizes.items() if size > MODULE_LINES} == {}


def test_the_layers_below_services_never_import_it() -> None:
    """A recall goes services -> pipeline and stays there: the stages, the fold engine
    and the lease, the window and the models import nothing from the services."""
    below = ("agentmemory.pipeline", "agentmemory.folding", "agentmemory.window",
             "agentmemory.models", "agentmemory.querysets", "agentmemory.summarizers",
             "agentmemory.writes")
    upward = {
        name: sorted(target for target in targets if target.startswith("agentmemory.services"))
        for name, targets in import_graph().items()
        if name.startswith(below)
    }
    assert {name: targets for name, targets in upward.items() if targets} == {}
