"""Layering conventions: no import cycles, the import-linter contracts cover every module, and only
the store (``kbctl/store/``, the embedded server and migrations included) talks to PostgreSQL: no SQL
text, and no call that runs a statement, anywhere else."""

from __future__ import annotations

import ast
import re
from pathlib import Path

KBCTL = Path(__file__).resolve().parents[2] / "kbctl"

SQL = re.compile(
    r"\b(SELECT|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|INDEX|EXTENSION)|ALTER\s+TABLE"
    r"|DROP\s+|VACUUM|REINDEX|SET\s+LOCAL|COPY\s+\w+)\b"
)


#: Calls that run a statement: ``x.execute(...)``, ``x.executemany(...)``, and the store's named
#: statements, ``query(...)``/``template(...)`` (``kbctl.store.queries``), whatever is passed to them.
RUNS_SQL = {"execute", "executemany"}
NAMED_SQL = {"query", "template"}


def _outside_the_store(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "store" not in p.relative_to(root).parts[:1])


def _sql_call(node: ast.AST) -> str | None:
    """What a call runs SQL through, when it does: ``.execute(``, ``.executemany(``, ``query(``."""
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr in RUNS_SQL:
        return f"calls .{f.attr}("
    if isinstance(f, ast.Name) and f.id in NAMED_SQL:
        return f"calls {f.id}("
    if (
        isinstance(f, ast.Attribute)
        and f.attr in NAMED_SQL
        and isinstance(f.value, ast.Name)
        and f.value.id == "queries"
    ):
        return f"calls queries.{f.attr}("
    return None


def _docstrings(tree: ast.AST) -> set[int]:
    owners = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, owners)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def sql_offenders(root: Path = KBCTL) -> list[str]:
    """``path:line: text`` for each string constant (docstrings aside) that reads like SQL, each
    use of ``psycopg.sql`` (statement composition), each call that runs a statement (``_sql_call``,
    found in the syntax tree, whatever its argument) and each import of the store's named
    statements (``kbctl.store.queries``), in a module outside the store."""
    out = []
    for path in _outside_the_store(root):
        tree = ast.parse(path.read_text(), str(path))
        docs = _docstrings(tree)
        rel = path.relative_to(root.parent)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                if SQL.search(node.value):
                    out.append((str(rel), node.lineno, repr(node.value.strip()[:60])))
            elif isinstance(node, ast.ImportFrom) and node.module in ("psycopg", "psycopg.sql"):
                if node.module == "psycopg.sql" or any(a.name == "sql" for a in node.names):
                    out.append((str(rel), node.lineno, "imports psycopg.sql"))
            elif isinstance(node, ast.Import) and any(a.name == "psycopg.sql" for a in node.names):
                out.append((str(rel), node.lineno, "imports psycopg.sql"))
            elif isinstance(node, ast.ImportFrom) and (node.module or "").endswith("store.queries"):
                out.append((str(rel), node.lineno, "imports the store's statements (store.queries)"))
            elif (call := _sql_call(node)) is not None:
                out.append((str(rel), node.lineno, call))
    return [f"{path}:{line}: {what}" for path, line, what in sorted(out)]


def test_no_sql_outside_the_store():
    offenders = sql_offenders()
    assert not offenders, "SQL outside kbctl/store/ (move it to sql/queries and a store function):\n" + "\n".join(
        offenders
    )


def test_the_scan_finds_sql(tmp_path):
    """The check above is not vacuous: statements, SET LOCAL and psycopg.sql are found, docstrings are not."""
    pkg = tmp_path / "kbctl"
    (pkg / "store").mkdir(parents=True)
    (pkg / "store" / "ok.py").write_text('Q = "SELECT 1"\n')
    (pkg / "store" / "db.py").write_text('Q = "CREATE TABLE t ()"\n')
    (pkg / "lane.py").write_text(
        '"""SELECT in a docstring is prose."""\nfrom psycopg import sql\n'
        'def f(conn):\n    """UPDATE t SET x: prose too."""\n'
        '    conn.execute("SET LOCAL enable_sort = off")\n    return conn.execute("SELECT 1 FROM x")\n'
    )
    found = sql_offenders(pkg)
    assert [f.split(": ", 1)[0] for f in found] == [
        "kbctl/lane.py:2",
        "kbctl/lane.py:5",  # the statement
        "kbctl/lane.py:5",  # the call that runs it
        "kbctl/lane.py:6",
        "kbctl/lane.py:6",
    ]


def test_the_scan_finds_calls_that_run_sql(tmp_path):
    """A statement run outside the store is found by its call, not by its text: ``.execute(`` and
    ``.executemany(`` on anything, the store's ``query(``/``template(``, and their import. A
    method that only shares a name (a model's ``.query(text)``) is not a statement; the store
    (``store/db.py`` included) may run them."""
    pkg = tmp_path / "kbctl"
    (pkg / "store").mkdir(parents=True)
    ok = "from .queries import query\ndef f(conn):\n    return conn.execute(query('a/b'))\n"
    (pkg / "store" / "ok.py").write_text(ok)
    (pkg / "store" / "db.py").write_text(ok)
    (pkg / "ingest").mkdir()
    (pkg / "ingest" / "reembed.py").write_text(
        "from ..store.queries import query\n"
        "def f(conn, stmt, rows):\n"
        "    conn.execute(query('generations/profile'), (1,))\n"
        "    conn.cursor().executemany(stmt, rows)\n"
        "    return queries.template('x')\n"
        "def g(model):\n"
        "    return model.query('a text')\n"
    )
    found = sql_offenders(pkg)
    assert found == [
        "kbctl/ingest/reembed.py:1: imports the store's statements (store.queries)",
        "kbctl/ingest/reembed.py:3: calls .execute(",
        "kbctl/ingest/reembed.py:3: calls query(",
        "kbctl/ingest/reembed.py:4: calls .executemany(",
        "kbctl/ingest/reembed.py:5: calls queries.template(",
    ]


def _import_graph() -> dict[str, set[str]]:
    """``module -> modules it imports`` inside kbctl, as grimp sees them (imports inside functions
    and under ``TYPE_CHECKING`` included)."""
    import grimp

    graph = grimp.build_graph("kbctl", cache_dir=None)
    return {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}


def _package_graph(modules: dict[str, set[str]]) -> dict[str, set[str]]:
    """The same imports between ``kbctl.<top-level module or subpackage>``."""
    top = lambda m: ".".join(m.split(".")[:2])  # noqa: E731
    out: dict[str, set[str]] = {}
    for importer, imported in modules.items():
        out.setdefault(top(importer), set()).update(t for t in map(top, imported) if t != top(importer))
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return sorted(found)


def _describe(components: list[list[str]], graph: dict[str, set[str]]) -> str:
    return "\n".join(" ; ".join(f"{a} -> {b}" for a in c for b in sorted(graph[a]) if b in c) for c in components)


def test_no_import_cycles():
    """No module imports itself back, even lazily: a cycle means two layers that are really one."""
    graph = _import_graph()
    found = cycles(graph)
    assert not found, "import cycles between kbctl modules:\n" + _describe(found, graph)


def test_no_import_cycles_between_subpackages():
    """``kbctl.store`` and ``kbctl.search`` (and every other pair of top-level parts) depend one way."""
    graph = _package_graph(_import_graph())
    found = cycles(graph)
    assert not found, "import cycles between kbctl's top-level modules and subpackages:\n" + _describe(found, graph)


def test_the_cycle_finder_finds_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e", "d"}, "f": {"g"}, "g": {"f"}}
    assert cycles(graph) == [["a", "b", "c"], ["f", "g"]]


def test_the_typer_rich_contract_lists_every_library_module():
    """The import-linter contract "only kbctl.cli imports typer and rich" names its modules one by
    one: a new top-level module or subpackage must be added to it."""
    import tomllib

    config = tomllib.loads((KBCTL.parent / "pyproject.toml").read_text())["tool"]["importlinter"]
    [contract] = [c for c in config["contracts"] if set(c.get("forbidden_modules", ())) == {"typer", "rich"}]
    parts = {
        p.stem if p.suffix == ".py" else p.name
        for p in KBCTL.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    }
    assert {f"kbctl.{p}" for p in parts - {"cli", "__main__"}} == set(contract["source_modules"])


def _layers() -> list[set[str]]:
    """The one ``layers`` contract of pyproject.toml, top to bottom, each layer as its set of modules."""
    import tomllib

    config = tomllib.loads((KBCTL.parent / "pyproject.toml").read_text())["tool"]["importlinter"]
    [contract] = [c for c in config["contracts"] if c["type"] == "layers"]
    return [{m.strip() for m in layer.split("#")[0].split("|")} for layer in contract["layers"]]


def test_every_module_has_its_layer():
    """The layer order names every top-level module and subpackage (``kbctl.ingest`` module by
    module: its orchestrator sits above the store, its pure steps below it), so a new module
    cannot be added without deciding where it stands."""
    placed = set().union(*_layers())
    parts = {
        p.stem if p.suffix == ".py" else p.name
        for p in KBCTL.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    }
    expected = {f"kbctl.{p}" for p in parts - {"ingest"}}
    expected |= {f"kbctl.ingest.{p.stem}" for p in (KBCTL / "ingest").glob("*.py") if p.stem != "__init__"}
    assert placed == expected, (
        f"give {sorted(expected - placed)} a layer in pyproject.toml; drop {sorted(placed - expected)}"
    )


def test_the_layers_run_top_to_bottom():
    """Not vacuous: the order is the house's (the CLI first, the foundation last, the store below
    the orchestrator and above the pure steps)."""
    layers = _layers()
    where = {m: i for i, layer in enumerate(layers) for m in layer}
    assert where["kbctl.cli"] < where["kbctl.server"] < where["kbctl.api"] < where["kbctl.search"]
    assert where["kbctl.ingest.pipeline"] < where["kbctl.ingest.writer"] < where["kbctl.store"]
    assert where["kbctl.store"] < where["kbctl.ingest.steps"] < where["kbctl.extract"] < where["kbctl.errors"]
