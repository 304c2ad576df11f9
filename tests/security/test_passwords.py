"""Weak passwords are refused at sign-up, at a password change and at an operator's reset:
common ones (12345678 and password were accepted), spaces only, the username itself."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app import PROJECT_ROOT
from app.accounts import passwords
from tests.test_accounts import signup


@pytest.mark.parametrize(
    ("username", "password", "message"),
    [
        ("ada", "12345678", "most common"),
        ("ada", "password", "most common"),
        ("ada", "PassWord1", "most common"),  # compared ignoring case
        ("ada", "  qwertyuiop ", "most common"),  # and surrounding spaces
        ("ada", " " * 8, "only spaces"),
        ("ada", "\t" * 9, "only spaces"),
        ("lovelace99", "lovelace99", "not your username"),
        ("lovelace99", "LoveLace99", "not your username"),
        ("ada", "short", "8 to 200"),
        ("ada", "x" * 201, "8 to 200"),
    ],
)
def test_weak_passwords_are_refused_at_sign_up(client, username, password, message):
    response = signup(client, username=username, password=password)
    assert response.status_code == 400
    assert message in response.text


def test_good_passwords_are_accepted(client):
    assert signup(client, username="ada", password="purple elephant rides").status_code == 302


def test_the_list_holds_the_10000_most_common_and_is_what_the_script_builds():
    common = passwords.common_passwords()
    assert len(common) == 10_000
    assert {"123456", "password", "12345678", "qwerty", "iloveyou"} <= common
    result = subprocess.run(
        [sys.executable, "scripts/build_common_passwords.py", "--check"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_operator_reset_refuses_weak_passwords(app, client, runner):
    signup(client, username="ada")
    for weak in ("12345678", "        "):
        result = runner.invoke(args=["reset-password", "ada"], input=f"{weak}\n{weak}\n")
        assert result.exit_code == 1 and "password" in result.output
