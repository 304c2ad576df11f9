"""The `flask` command line: every command in its place, once, on its blueprint's `cli`.

Each package's commands are on its blueprint's command line (`Blueprint.cli`, with
`cli_group=None` so they sit at the top of `flask`); only the app-wide ones (app/cli.py) are on
app.cli itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from app.accounts.routes import bp as accounts_bp
from app.crowd.cli import study_group
from app.crowd.routes import bp as crowd_bp
from app.game.routes import bp as game_bp
from app.leaderboard.routes import bp as leaderboard_bp
from app.research.routes import bp as research_bp

APP_DIR = Path(__file__).resolve().parent.parent / "app"

# What each blueprint puts on the command line.
BLUEPRINT_COMMANDS = {
    accounts_bp: {"create-researcher", "reset-password"},
    crowd_bp: {"study"},
    game_bp: {"daily", "difficulty"},
    leaderboard_bp: {"boards"},
    research_bp: {"export", "validation"},
}
# On app.cli itself: app/cli.py's app-wide commands, and Flask-Migrate's `db`.
APP_WIDE = {"import", "load-demo", "show-config"}
TOP = set().union(*BLUEPRINT_COMMANDS.values()) | APP_WIDE | {"db"}
STUDY = {
    "check", "close", "create", "delete", "edit", "link", "reopen", "report",  # app/crowd/cli.py
    "review", "undo-verify", "verify",  # app/crowd/verify_cli.py
    "flags",  # app/crowd/fraud_cli.py
    "hints", "plan", "publish",  # app/crowd/plan_cli.py
    "prolific",  # app/crowd/prolific_cli.py
}  # fmt: skip
PROLIFIC = {"apply", "create", "message", "pause", "publish", "resolve-payment", "start", "sync"}


def listed(output: str) -> list[str]:
    """The command names of a `--help` page's "Commands:" section, in order, repeats kept."""
    section = output.split("Commands:\n", 1)[1]
    return re.findall(r"^  (\S+)", section, flags=re.MULTILINE)


@pytest.mark.parametrize(
    ("args", "expected"),
    [([], TOP), (["study"], STUDY), (["study", "prolific"], PROLIFIC)],
    ids=["flask", "study", "prolific"],
)
def test_help_lists_every_command_once(make_app, args, expected):
    result = make_app().test_cli_runner().invoke(args=[*args, "--help"])
    assert result.exit_code == 0, result.output
    names = listed(result.output)
    assert sorted(names) == sorted(expected)  # each exactly once, none missing, none extra


def test_each_blueprint_carries_its_own_commands(make_app):
    app = make_app()
    for blueprint, names in BLUEPRINT_COMMANDS.items():
        assert blueprint.cli_group is None, blueprint.name  # the commands keep top-level names
        assert set(blueprint.cli.commands) == names, blueprint.name
        for name in names:  # register_blueprint put the blueprint's own command on app.cli
            assert app.cli.commands[name] is blueprint.cli.commands[name]
    assert set(app.cli.commands) == TOP
    # The crowd's modules all add to the one `study` group.
    assert crowd_bp.cli.commands["study"] is study_group


def test_more_apps_share_the_commands_and_add_none(make_app):
    first, second = make_app(), make_app()
    assert first.cli.commands["study"] is second.cli.commands["study"] is study_group
    assert set(study_group.commands) == STUDY
    assert set(second.cli.commands) == TOP
    result = second.test_cli_runner().invoke(args=["study", "--help"])
    assert sorted(listed(result.output)) == sorted(STUDY)


def test_only_app_cli_py_puts_commands_on_app_cli():
    """A package's command goes on its blueprint's `cli`; app/cli.py keeps the app-wide ones
    (app/catalog, which `import` and `load-demo` fill, has no blueprint)."""
    on_app_cli = re.compile(r"\bapp\.cli\.(command|add_command|group)\b|\.cli\.commands\[")
    users = {
        str(path.relative_to(APP_DIR.parent))
        for path in APP_DIR.rglob("*.py")
        if on_app_cli.search(path.read_text(encoding="utf-8"))
    }
    assert users == {"app/cli.py"}
    source = (APP_DIR / "cli.py").read_text(encoding="utf-8")
    assert set(re.findall(r'@app\.cli\.command\("([^"]+)"\)', source)) == APP_WIDE
    assert "add_command" not in source


def test_a_study_subcommand_from_another_module_runs_in_the_app(runner):
    # `flags` (app/crowd/fraud_cli.py) reaches the database through the blueprint's command.
    result = runner.invoke(args=["study", "flags", "no-such-study"])
    assert result.exit_code != 0
    assert "no study called 'no-such-study'" in result.output
    shown = runner.invoke(args=["show-config"])
    assert shown.exit_code == 0 and "database:" in shown.output


def test_every_command_keeps_a_help_text(make_app):
    app = make_app()

    def walk(command: click.Command, path: str):
        yield path, command
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, f"{path} {name}")

    for path, command in walk(app.cli, "flask"):
        if path != "flask":
            assert (command.help or "").strip(), f"{path} has no help text"
