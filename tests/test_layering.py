"""The Python package's layering: each module imports only what the "may import" table of
magics/giltracer/README.md allows (any import: at module level, inside a function, or for
the type checker), the imports have no cycle, and ``import giltracer`` loads neither the
C core nor IPython (they are imported where they are used)."""
import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "magics" / "giltracer"
BOOT = ROOT / "magics" / "_giltracer_boot.py"
OURS = ("giltracer", "_giltracer_boot")

if not (PKG / "README.md").is_file():
    pytest.skip("needs the source tree (magics/) next to tests/", allow_module_level=True)


def table():
    """module -> the modules its README row allows ("nothing of ours": none)."""
    rows = {}
    for line in (PKG / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.match(r"`(\w+)`", cells[0]) if len(cells) == 3 else None
        if m:
            rows[m.group(1)] = set(re.findall(r"`(\w+)`", cells[2]))
    return rows


def sources():
    """module name -> its source file: the package's modules and _giltracer_boot."""
    found = {p.stem: p for p in PKG.glob("*.py")}
    found["_giltracer_boot"] = BOOT
    return found


def _type_checking(node):
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports(path, top_level_only=False):
    """The modules of ours `path` imports. `top_level_only`: those imported when it is
    imported (module level, not for the type checker only: not inside a function or an
    ``if TYPE_CHECKING`` block)."""
    found = set()

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if top_level_only and (isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                      ast.Lambda)) or _type_checking(child)):
                continue
            if isinstance(child, ast.ImportFrom) and child.level == 1:
                found.update([child.module.split(".")[0]] if child.module else
                             (a.name for a in child.names))
            elif isinstance(child, ast.ImportFrom) and child.module:
                found.add(_ours(child.module))
            elif isinstance(child, ast.Import):
                found.update(_ours(a.name) for a in child.names)
            elif (isinstance(child, ast.Call) and ast.unparse(child.func).endswith("import_module")
                  and child.args and isinstance(child.args[0], ast.Constant)
                  and str(child.args[0].value).startswith(".")):
                found.add(child.args[0].value[1:])  # importlib.import_module(".x", __package__)
            visit(child)

    visit(ast.parse(path.read_text()))
    found.discard(None)
    return found


def _ours(name):
    """A module of ours by its table name (giltracer.x -> x; giltracer -> giltracer), else None."""
    head, _, rest = name.partition(".")
    if head not in OURS:
        return None
    return rest.split(".")[0] if head == "giltracer" and rest else head


def graph(top_level_only=False):
    return {name: imports(path, top_level_only) for name, path in sources().items()}


def test_table_reads_every_row():
    """The table parses (else the checks below check nothing) and names real modules."""
    rows = table()
    assert {"api", "rows", "render", "picture", "whatif_policy", "_giltracer_boot"} <= set(rows)
    assert rows["_giltracer_boot"] == set() and "rows" in rows["render"]
    known = set(sources()) | {"_core", "giltracer"}
    unknown = {m for allowed in rows.values() for m in allowed} - known
    assert not unknown, f"the table allows modules that do not exist: {unknown}"


def test_every_module_has_a_row():
    missing = set(sources()) - set(table())
    assert not missing, (f"modules without a row in magics/giltracer/README.md's table: "
                         f"{sorted(missing)}; add one (what it is, what it may import)")


def test_imports_follow_the_table():
    rows = table()
    wrong = {name: sorted(deps - rows.get(name, set())) for name, deps in graph().items()
             if deps - rows.get(name, set())}
    assert not wrong, (f"imports the table of magics/giltracer/README.md does not allow: "
                       f"{wrong}; import the other way round, or move the shared piece down")


def test_no_import_cycle():
    deps = graph()
    deps = {name: {"__init__" if d == "giltracer" else d for d in ds} for name, ds in deps.items()}
    state, path = {}, []

    def visit(name):
        state[name] = "open"
        path.append(name)
        for d in sorted(deps.get(name, ())):
            if state.get(d) == "open":
                cycle = path[path.index(d):] + [d]
                pytest.fail(f"import cycle: {' -> '.join(cycle)}")
            if d not in state:
                visit(d)
        path.pop()
        state[name] = "done"

    for name in sorted(deps):
        if name not in state:
            visit(name)


def test_import_giltracer_loads_neither_the_core_nor_ipython():
    """What ``import giltracer`` imports at module level, transitively: no _core, no magics
    (IPython), nothing of the package from _giltracer_boot."""
    deps = graph(top_level_only=True)
    loaded, todo = set(), ["__init__"]
    while todo:
        name = todo.pop()
        if name not in loaded:
            loaded.add(name)
            todo.extend(deps.get(name, ()))
    assert "_core" not in loaded and "magics" not in loaded, sorted(loaded)
    assert graph()["_giltracer_boot"] == set()


def test_the_checker_sees_imports(tmp_path):
    """Every form of import is found (else the table checks nothing)."""
    src = tmp_path / "m.py"
    src.write_text("from . import a, b\nfrom .c import x\nimport giltracer.d\n"
                   "from giltracer import e\nimport os\nif TYPE_CHECKING:\n    from . import f\n"
                   "def g():\n    from . import h\n    importlib.import_module('.i', __package__)\n")
    assert imports(src) == {"a", "b", "c", "d", "giltracer", "f", "h", "i"}
    assert imports(src, top_level_only=True) == {"a", "b", "c", "d", "giltracer"}
