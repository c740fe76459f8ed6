"""The approval defaults seeded for the fs tools (home, sandbox, memory, shared folders
and projects), decided by the real
gate over the rules of a fresh registry: the fs tools inside a folder the member
belongs to run without asking (read-only memberships are refused in code, not here),
and nothing that merely looks like such a path is waved through."""

from __future__ import annotations

import pytest

from skald_host.core.agent.approvals import RuleStore, decide


@pytest.mark.parametrize(
    "tool, path, expected",
    [
        ("read_file", "shared/recipes/soup.md", "allow"),
        ("list_files", "shared/recipes", "allow"),
        ("list_files", "shared", "allow"),
        ("list_files", "projects", "allow"),
        ("grep_files", "projects/olga/garden", "allow"),
        ("write_file", "projects/olga/garden/plan.md", "allow"),
        ("edit_file", "~/shared/recipes/soup.md", "allow"),
        ("show_file_to_user", "./projects/olga/garden/photo.png", "allow"),
        ("write_file", "shared/../../etc/passwd", "require"),  # climbs out: matches no allow rule
        ("write_file", "../x", "require"),
        # Not folders but the member's own home and sandbox, which are free (registry step 6);
        # the namespace refuses a write to the bare folder list in code.
        ("write_file", "sharedx/a.md", "allow"),
        ("write_file", "/etc/shared/x", "allow"),
        ("write_file", "notes/todo.md", "allow"),
        ("list_files", None, "allow"),
        # Memory is stricter than the home: a shared note asks before it is written.
        ("write_file", "shared-memory/x.md", "require"),
        ("edit_file", "~/shared-memory/../shared-memory/x.md", "require"),
        ("write_file", "user-memory/x.md", "allow"),
        ("execute_cmd", "projects/olga/garden", "require"),  # a command is not a file tool
    ],
)
async def test_folder_paths_are_decided_by_the_seeded_rules(skald, tool, path, expected):
    host = await skald.start()
    rules = await RuleStore(host.core.registry).rules()
    arguments = {} if path is None else {"path": path}
    assert decide(rules, tool, arguments, frozenset()) == expected


@pytest.mark.parametrize(
    "spelling",
    ["secret/plan.md", "~/secret/plan.md", "/home/member/secret/plan.md", "//home/member/secret/plan.md",
     "/home//member/secret/plan.md", "/home/member/./secret/plan.md", "./~/secret/plan.md"],
)
async def test_an_admin_s_path_rule_judges_every_spelling_of_the_file_the_tool_reaches(skald, spelling):
    """The file tools reach ``secret/plan.md`` through every spelling below (the home's
    sandbox path, doubled slashes); a rule on ``secret/*`` must judge them all as that
    file (security probe: ``/home/member/…`` slipped past deny rules as a sandbox path)."""
    from skald_host.core.agent.approvals import Rule, normalise_path
    from skald_host.core.files.service import home_relative

    host = await skald.start()
    deny = Rule(id=0, tool_pattern="write_file", path_class="secret/*", group_id=None, action="deny", priority=1, note="")
    rules = [deny, *await RuleStore(host.core.registry).rules()]
    assert decide(rules, "write_file", {"path": spelling}, frozenset()) == "deny"
    assert normalise_path(spelling) == home_relative(spelling) == "secret/plan.md"
