"""``skald --help`` as a newcomer reads it: every option says what it does, restore's
--data-dir says it is the new, empty target (not the live data dir), and a finished
restore names the command that starts a server on what it restored."""

from __future__ import annotations

import re
import shlex

from tests.plugins.test_cli import skald


def options_without_help(text: str) -> list[str]:
    """The options of an argparse help text listed with nothing after them."""
    lines = text.split("options:", 1)[1].splitlines()
    bare = []
    for index, line in enumerate(lines):
        match = re.match(r"^  (-[-\w]+(?:[ ,][^ ].*?)?)\s*$", line)  # an option alone on its line ...
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if match and not following.startswith(" " * 8):  # ... and no description below it
            bare.append(match.group(1))
    return bare


def test_every_option_of_setup_serve_and_plugins_says_what_it_does(tmp_path):
    for command, options in (
        ("setup", ("--username", "--display-name")), ("serve", ("--host", "--port")), ("plugins", ("--json",)),
    ):
        shown = skald(command, "--help", cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        assert options_without_help(shown.stdout) == [], (command, shown.stdout)
        for option in options:
            assert option in shown.stdout
    serve = skald("serve", "--help", cwd=tmp_path).stdout
    assert "127.0.0.1" in serve and "8080" in serve


def test_restore_help_says_its_data_dir_is_the_new_empty_one(tmp_path):
    shown = skald("restore", "--help", cwd=tmp_path).stdout
    said = " ".join(shown.split())
    assert "where databases and logs live" not in said, said
    assert "the new, empty data dir to restore into" in said and "never the live one" in said, said


def test_a_restore_names_the_command_that_starts_a_server_on_it(tmp_path):
    data, backups, fresh = tmp_path / "data", tmp_path / "backups", tmp_path / "restored"
    created = skald("setup", "--data-dir", str(data), "--username", "admin", "--password-stdin",
                    cwd=tmp_path, stdin="a long enough admin password\n")
    assert created.returncode == 0, created.stderr
    backups.mkdir()
    taken = skald("backup", "--data-dir", str(data), "--to", str(backups), cwd=tmp_path)
    assert taken.returncode == 0, taken.stderr
    backup = next(p for p in backups.iterdir() if p.name.startswith("skald-backup-"))
    restored = skald("restore", str(backup), "--data-dir", str(fresh), cwd=tmp_path)
    assert restored.returncode == 0, restored.stderr
    serve = shlex.join(["skald", "serve", "--data-dir", str(fresh.resolve())])
    assert f"Start the server on it with '{serve}'" in restored.stdout, restored.stdout
