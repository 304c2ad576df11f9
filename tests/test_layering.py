"""The game knows nothing of crowd studies: it imports no module of app.crowd (the studies join
the game through app/game/hooks.py)."""

import ast
from pathlib import Path

GAME = Path(__file__).resolve().parent.parent / "app" / "game"


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_game_imports_nothing_from_the_crowd_package():
    offenders = {
        path.name: sorted(name for name in _imports(path) if name.startswith("app.crowd"))
        for path in sorted(GAME.glob("*.py"))
    }
    assert {name: found for name, found in offenders.items() if found} == {}
    assert len(offenders) > 5  # the game's modules were read
