"""The layers the build enforces (`make lint` runs this file), read from the source with `ast`:

- **layers**: roftcore imports nothing of the project; generation and analysis nothing of app/;
  in app/, the base modules (configuration, extensions, errors...) import no model, the models
  no service, the services no view (a blueprint's routes, `*_views`, a command line), and a
  service imports services of its own package or of a package below it in `SERVICE_PACKAGES`;
- **no import cycle** between modules (a function-level import counts: it is a dependency too);
- **no private names across modules**: `from x import _name`, or `x._name` on an imported module;
- the game's constants (round and set kinds) live in app/models, so a package can name them
  without the game's services, and the game's hooks module imports nothing from app/crowd;
- **SQL only in the round core**: the round core is the modules of `ROUND_CORE`: a round's
  load (app/game/rounds.py), its start (starts.py), its reveals (reveals.py), its answer
  (answers.py) and its set (sets.py). Every statement that changes a round's life is built
  there. No other module of app/game (views included) may
  (a) write textual SQL: call sqlalchemy's `text(...)` or `literal_column(...)`, or
      `.exec_driver_sql(...)`;
  (b) build a write on the round's own tables (`ROUND_TABLES`: Round, Reveal and GameSet, the
      tables `rounds`, `reveals` and `game_sets`, named from app.models, or their `__table__`):
      sqlalchemy's `insert(...)`, `update(...)` or `delete(...)` of any dialect on one of them,
      or `.insert()`, `.update()`, `.delete()` called on something that names one
      (`Round.__table__.update()`, `db.session.query(Round).delete()`);
  (c) make a new Round, Reveal or GameSet object (the ORM's insert).
  Reading those tables with the ORM (`select(Round)...`) is free, and so is writing other
  tables: a text's fitted level (app/game/levels.py updates `examples`) or an explanation's vote
  row belong to their features. A change to a loaded object's attribute is an ORM write that
  the source does not show by type, so the check does not see it. Each breach is listed as
  "sql outside the round core: module:line what"; this contract has no exception list.

Imports under `if TYPE_CHECKING:` are left out (they never run). Where the tree still breaks a
contract, the import is listed in tests/layering.toml; the list can only shrink: an entry that
no longer matches an import fails too, so that it is taken out once the import is gone.
"""

from __future__ import annotations

import ast
import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXCEPTIONS = Path(__file__).resolve().parent / "layering.toml"
TOPS = ("app", "roftcore", "analysis", "generation")
# Base modules of app/: below the models, importing none of them.
BASE = {
    "app.config",
    "app.database",
    "app.errors",
    "app.extensions",
    "app.logs",
    "app.paging",
    "app.shared_cache",
}
# Service packages, lowest first: a service imports services of its own package or lower ones.
SERVICE_PACKAGES = (
    "app.catalog",
    "app.leaderboard",
    "app.game",
    "app.crowd",
    "app.accounts",
    "app.research",
)
# The round core: the only modules of app/game that write textual SQL or change the round's
# own tables (see the module's docstring).
ROUND_CORE = (
    "app.game.rounds",
    "app.game.starts",
    "app.game.reveals",
    "app.game.answers",
    "app.game.sets",
)
# The round's own tables, as app.models names their classes.
ROUND_TABLES = ("Round", "Reveal", "GameSet")
WRITES = ("insert", "update", "delete")
# Views that are not named as views are (blueprints without a routes module, the app factory).
VIEWS = {"app", "app.cli", "app.health", "app.pages"}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module
    name: str | None  # the imported name, for `from target import name` of a non-module
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_sources() -> dict[str, tuple[str, bool]]:
    """Module name -> (source, is a package's __init__) for every module of TOPS."""
    return dict(_read_tree())


@functools.cache
def _read_tree() -> tuple[tuple[str, tuple[str, bool]], ...]:
    return tuple(
        (module_name(path), (path.read_text(encoding="utf-8"), path.name == "__init__.py"))
        for top in TOPS
        for path in sorted((ROOT / top).rglob("*.py"))
    )


def _runtime_nodes(tree: ast.AST):
    """Every node but those under `if TYPE_CHECKING:`."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                yield child
                yield from _runtime_nodes(child)
            continue
        yield node
        yield from _runtime_nodes(node)


@functools.cache
def _parse(source: str) -> ast.Module:
    return ast.parse(source)


def imports_of(sources: dict[str, tuple[str, bool]]) -> tuple[list[Import], list[Import]]:
    """The imports between the project's modules, and the uses of private names across modules
    (as Imports whose `name` is the private name)."""
    found: list[Import] = []
    private: list[Import] = []
    for module, (source, is_package) in sources.items():
        tree = _parse(source)
        aliases: dict[str, str] = {}  # a local name bound to one of our modules -> that module
        for node in _runtime_nodes(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in sources:
                        found.append(Import(module, alias.name, None, node.lineno))
                        if alias.asname:
                            aliases[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                package = module.split(".") if is_package else module.split(".")[:-1]
                base = package[: len(package) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    whole = f"{target}.{alias.name}"
                    if whole in sources:
                        found.append(Import(module, whole, None, node.lineno))
                        aliases[alias.asname or alias.name] = whole
                    elif target in sources:
                        found.append(Import(module, target, alias.name, node.lineno))
                        if _is_private(alias.name) and target != module:
                            private.append(Import(module, target, alias.name, node.lineno))
        for node in _runtime_nodes(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and _is_private(node.attr)
                and aliases[node.value.id] != module
            ):
                private.append(Import(module, aliases[node.value.id], node.attr, node.lineno))
    return found, private


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _top(module: str) -> str:
    return module.split(".")[0]


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def is_view(module: str) -> bool:
    last = module.rsplit(".", 1)[-1]
    return (
        module in VIEWS or last in ("routes", "cli") or last.endswith(("_views", "_cli"))
    ) and _top(module) == "app"


def level(module: str) -> int:
    """0 roftcore, 1 base, 2 models, 3 services, 4 views (app/); generation and analysis 3."""
    if _top(module) == "roftcore":
        return 0
    if _top(module) != "app":
        return 3
    if module in BASE:
        return 1
    if _package(module) == "app.models":
        return 2
    return 4 if is_view(module) else 3


def layer_breaks(found: list[Import]) -> set[str]:
    """'source -> target' for each import against the layers."""
    return {f"{imp.source} -> {imp.target}" for imp in found if _breaks(imp.source, imp.target)}


def _breaks(source: str, target: str) -> bool:
    if _top(source) != "app" and _top(target) == "app":
        return True  # generation or analysis on the site
    if level(target) > level(source):
        return True
    mine, theirs = _package(source), _package(target)
    return (
        level(source) == level(target) == 3
        and mine in SERVICE_PACKAGES
        and theirs in SERVICE_PACKAGES
        and SERVICE_PACKAGES.index(theirs) > SERVICE_PACKAGES.index(mine)
    )


def cycle_edges(found: list[Import], allowed: set[str]) -> list[list[str]]:
    """The import cycles between modules (each a list of modules), after taking out the
    `allowed` edges ('source -> target')."""
    graph: dict[str, set[str]] = {}
    for imp in found:
        if imp.source != imp.target and f"{imp.source} -> {imp.target}" not in allowed:
            graph.setdefault(imp.source, set()).add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def private_uses(private: list[Import]) -> set[str]:
    """'source -> target.name' for each use of another module's private name."""
    return {f"{imp.source} -> {imp.target}.{imp.name}" for imp in private}


def sql_outside_core(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """'module:line what' for each use of SQL against the round core's contract (see the
    module's docstring) in a module of app/game outside `ROUND_CORE`."""
    found = []
    for module, (source, _) in sorted(sources.items()):
        if not (module == "app.game" or module.startswith("app.game.")) or module in ROUND_CORE:
            continue
        tree = _parse(source)
        names = _sql_names(tree)
        for node in _runtime_nodes(tree):
            what = _sql_use(node, names) if isinstance(node, ast.Call) else None
            if what:
                found.append(f"{module}:{node.lineno} {what}")
    return found


@dataclass
class _SqlNames:
    """What a module's names stand for, as far as the SQL contract goes."""

    sql: dict[str, str]  # a local name -> the sqlalchemy name it binds (`text`, `update`...)
    sql_modules: set[str]  # local names bound from sqlalchemy (`sa`, `postgresql`, `func`...)
    tables: set[str]  # local names bound to a round table (`Round`, `table = Round.__table__`)


def _sql_names(tree: ast.Module) -> _SqlNames:
    names = _SqlNames({}, set(), set())
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "sqlalchemy":
                    names.sql_modules.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            package = node.module.split(".")
            for alias in node.names:
                local = alias.asname or alias.name
                if package[0] == "sqlalchemy":
                    names.sql[local] = alias.name
                    names.sql_modules.add(local)
                elif package[:2] == ["app", "models"] and alias.name in ROUND_TABLES:
                    names.tables.add(local)
    for node in _runtime_nodes(tree):  # `table = Round.__table__`, `R = Round`
        value = node.value if isinstance(node, ast.Assign) else None
        if isinstance(value, ast.Attribute) and value.attr == "__table__":
            value = value.value
        if isinstance(value, ast.Name) and value.id in names.tables:
            names.tables.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _sql_use(call: ast.Call, names: _SqlNames) -> str | None:
    """The SQL against the contract a call is ('textual SQL text()'...), or None."""
    func = call.func
    method = func.attr if isinstance(func, ast.Attribute) else None
    if isinstance(func, ast.Name):
        sql_name = names.sql.get(func.id)
    elif isinstance(func, ast.Attribute) and _names_in(func.value) & names.sql_modules:
        sql_name = func.attr  # `sa.text`, `postgresql.insert`
    else:
        sql_name = None
    if sql_name in ("text", "literal_column") or method == "exec_driver_sql":
        return f"textual SQL {ast.unparse(func)}()"
    on_a_table = any(_names_in(arg) & names.tables for arg in (*call.args, *call.keywords))
    if (sql_name in WRITES and on_a_table) or (
        isinstance(func, ast.Attribute)
        and method in WRITES
        and _names_in(func.value) & names.tables
    ):
        return f"a write on a round table: {ast.unparse(call)}"
    if isinstance(func, ast.Name) and func.id in names.tables:
        return f"a new {func.id}"
    return None


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def exceptions() -> dict[str, set[str]]:
    data = tomllib.loads(EXCEPTIONS.read_text(encoding="utf-8"))
    return {key: set(data.get(key, [])) for key in ("layers", "cycles", "private")}


def check(
    sources: dict[str, tuple[str, bool]], allowed: dict[str, set[str]] | None = None
) -> list[str]:
    """Every contract broken by `sources`, beyond the recorded exceptions, and every recorded
    exception that no longer matches an import (the list only shrinks)."""
    found, private = imports_of(sources)
    allowed = exceptions() if allowed is None else allowed
    problems = []
    layers = layer_breaks(found)
    problems += [f"layers: {edge}" for edge in sorted(layers - allowed["layers"])]
    problems += [f"stale layers exception: {edge}" for edge in sorted(allowed["layers"] - layers)]
    edges = {f"{imp.source} -> {imp.target}" for imp in found}
    problems += [f"cycle: {' <-> '.join(cycle)}" for cycle in cycle_edges(found, allowed["cycles"])]
    problems += [f"stale cycles exception: {edge}" for edge in sorted(allowed["cycles"] - edges)]
    uses = private_uses(private)
    problems += [f"private name: {use}" for use in sorted(uses - allowed["private"])]
    problems += [f"stale private exception: {use}" for use in sorted(allowed["private"] - uses)]
    problems += [f"sql outside the round core: {use}" for use in sql_outside_core(sources)]
    return problems


# -- the contracts on the tree ----------------------------------------------------------------


def test_the_tree_keeps_every_contract_beyond_the_recorded_exceptions():
    sources = project_sources()
    assert len(sources) > 100 and "app.game.rounds" in sources  # the tree was read
    assert check(sources) == []


def test_the_game_imports_nothing_from_the_crowd_package():
    found, _ = imports_of(project_sources())
    assert [imp for imp in found if imp.source.startswith("app.game") and
            imp.target.startswith("app.crowd")] == []  # fmt: skip


def test_round_and_set_kinds_are_named_in_the_models():
    from app.game import rounds, tally
    from app.models import rounds as round_models
    from app.models import sets as set_models

    kinds = {"NORMAL": "NORMAL_ROUND", "CHECK": "CHECK_ROUND", "PRACTICE": "PRACTICE_ROUND"}
    # The game names them from app.models and keeps no names of its own for them.
    for game_name in kinds:
        assert not hasattr(rounds, game_name) and not hasattr(tally, game_name)
    assert len({getattr(round_models, name) for name in kinds.values()}) == 3
    assert set_models.NORMAL_SET and set_models.DAILY_SET and set_models.PRACTICE_SET
    found, _ = imports_of(project_sources())
    # The crowd's services read the kinds from app.models; what one still takes from the game's
    # rounds services is a function (creating a round).
    crowd_on_rounds = {
        imp.source for imp in found if imp.source.startswith("app.crowd") and
        imp.target in ("app.game.rounds", "app.game.starts") and not is_view(imp.source)
    }  # fmt: skip
    assert crowd_on_rounds <= {"app.crowd.serving"}


# -- each contract fails when a violation is added ----------------------------------------------


def _with(**modules: str) -> dict[str, tuple[str, bool]]:
    """The tree, with these modules added (names with "__" for dots)."""
    sources = project_sources()
    for name, source in modules.items():
        sources[name.replace("__", ".")] = (source, False)
    return sources


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("roftcore__extra", "from app.extensions import db\n", "layers: roftcore.extra -> "),
        ("roftcore__extra", "import analysis.load\n", "layers: roftcore.extra -> analysis"),
        ("analysis__extra", "import app.models\n", "layers: analysis.extra -> app.models"),
        ("app__models__extra", "from app.game import rounds\n", "layers: app.models.extra -> "),
        ("app__extensions2", "from app.models import Round\n", None),
        ("app__game__extra", "from app.game.routes import bp\n", "layers: app.game.extra -> "),
        ("app__catalog__extra", "from app.crowd import pool\n", "layers: app.catalog.extra -> "),
    ],
)
def test_a_new_import_against_the_layers_fails(module, source, expected):
    problems = check(_with(**{module: source}))
    if expected is None:  # not a base module by name: a service may import a model
        assert problems == []
    else:
        assert [p for p in problems if p.startswith(expected)], problems


def test_a_base_module_importing_a_model_fails():
    sources = project_sources()
    source, is_package = sources["app.paging"]
    sources["app.paging"] = (source + "\nfrom app.models import Round\n", is_package)
    assert "layers: app.paging -> app.models" in check(sources)


def test_a_new_import_cycle_fails():
    problems = check(
        _with(
            app__game__extra_a="from app.game import extra_b\n",
            app__game__extra_b="def later():\n    from app.game.extra_a import x\n",
        )
    )
    assert "cycle: app.game.extra_a <-> app.game.extra_b" in problems


def test_a_private_name_imported_from_another_module_fails():
    problems = check(
        _with(
            app__game__extra_a="from app.extensions import _private\n",
            app__game__extra_b="from app import extensions\n\nextensions._hidden()\n",
            app__game__extra_c="from app.extensions import __doc__, public\n",
        )
    )
    assert "private name: app.game.extra_a -> app.extensions._private" in problems
    assert "private name: app.game.extra_b -> app.extensions._hidden" in problems
    assert not [p for p in problems if "extra_c" in p]


def test_imports_only_for_type_checking_do_not_count():
    problems = check(
        _with(
            app__models__extra=(
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from app.game.rounds import Decide\n"
            )
        )
    )
    assert problems == []


def test_an_exception_whose_import_is_gone_fails():
    allowed = exceptions()
    allowed["private"] = allowed["private"] | {"app.game.extra -> app.extensions._gone"}
    allowed["cycles"] = allowed["cycles"] | {"app.game.extra -> app.extensions"}
    assert check(project_sources(), allowed) == [
        "stale cycles exception: app.game.extra -> app.extensions",
        "stale private exception: app.game.extra -> app.extensions._gone",
    ]


_SA = "from sqlalchemy import insert, literal_column, select, text, update\n"
_MODELS = "from app.extensions import db\nfrom app.models import Example, GameSet, Reveal, Round\n"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('db.session.execute(text("SELECT 1"))\n', "app.game.extra:4 textual SQL text()"),
        ('Q = select(literal_column("1"))\n', "app.game.extra:4 textual SQL literal_column()"),
        ('db.session.connection().exec_driver_sql("DELETE FROM rounds")\n', "exec_driver_sql()"),
        (
            "db.session.execute(update(Round).values(upvotes=Round.upvotes + 1))\n",
            "app.game.extra:4 a write on a round table: update(Round)",
        ),
        ("Q = insert(Reveal.__table__)\n", "a write on a round table: insert(Reveal.__table__)"),
        ("T = GameSet.__table__\nQ = T.delete()\n", "app.game.extra:5 a write on a round table: "),
        ("db.session.query(Round).delete()\n", "a write on a round table: db.session.query("),
        ("db.session.add(GameSet(player_id=1, size=5))\n", "app.game.extra:4 a new GameSet"),
    ],
)
def test_sql_outside_the_round_core_fails(body, expected):
    problems = check(_with(app__game__extra=_SA + _MODELS + body))
    assert [p for p in problems if p.startswith("sql outside the round core: ")], problems
    assert [p for p in problems if expected in p], problems


def test_sql_inside_the_round_core_is_the_core_s_own():
    sources = project_sources()
    source, is_package = sources["app.game.rounds"]
    added = "\n" + _SA + _MODELS + 'db.session.execute(update(Round).values(guess=text("1")))\n'
    sources["app.game.rounds"] = (source + added, is_package)
    assert check(sources) == []


def test_reading_the_round_s_tables_and_writing_others_outside_the_core_passes():
    body = (
        "Q = select(Round.id, GameSet.points).join(GameSet, GameSet.id == Round.set_id)\n"
        "db.session.execute(update(Example).values(level=None))\n"
        "draw = object()\ndraw.text((0, 0), 'Real or Fake Text')\n"
        "seen = set()\nseen.update({1})\n"
    )
    assert check(_with(app__game__extra=_SA + _MODELS + body)) == []
